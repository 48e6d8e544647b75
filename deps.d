out.hsaco: 
