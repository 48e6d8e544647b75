out.hsaco: kernel.hip \
  /usr/include/a\ b.h include/0/c.h $$x
