//! The frames of the serving protocol ([`super::pool`], [`super::serve`]): a length (4 bytes,
//! little-endian) then that many bytes of MessagePack. The worker reads and writes them
//! blocking; the parent on a non-blocking socket, with a deadline and its thread's
//! cancellation checked every 50 ms.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::fs::read::CODE_OBJECT_LIMIT;

/// The largest frame either side accepts: a request (source and headers) or a result (code
/// object and log) is bounded as a code object is.
pub(super) const LIMIT: u64 = CODE_OBJECT_LIMIT;

/// Writes one frame holding `body` (blocking).
///
/// Errors: the stream's; `InvalidInput` for a body over [`LIMIT`].
pub(super) fn write_blocking(out: &mut impl Write, body: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| u64::from(n) <= LIMIT)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame too long"))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(body)?;
    out.flush()
}

/// Reads one frame (blocking); `None` at end of input before its first byte.
///
/// Errors: the stream's (`UnexpectedEof` in a frame); `InvalidData` for a length over
/// [`LIMIT`].
pub(super) fn read_blocking(input: &mut impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_le_bytes(len);
    if u64::from(len) > LIMIT {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes, over the limit of {LIMIT}"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    input.read_exact(&mut body)?;
    Ok(Some(body))
}

/// Why the parent's exchange with a worker stopped.
#[derive(Debug)]
pub(super) enum Stop {
    /// The worker closed its end (it exited or died).
    Closed,
    /// The deadline passed.
    TimedOut,
    /// The thread's cancellation token was cancelled.
    Cancelled,
    /// The socket failed otherwise, or the frame was malformed.
    Broken(String),
}

/// The parent's end of a worker's socket.
pub(super) struct Channel {
    socket: UnixStream,
}

impl Channel {
    /// `socket`, made non-blocking.
    ///
    /// Errors: `fcntl`'s.
    pub(super) fn new(socket: UnixStream) -> std::io::Result<Channel> {
        socket.set_nonblocking(true)?;
        Ok(Channel { socket })
    }

    /// Sends one frame of `body` by `deadline` (`MSG_NOSIGNAL`: a worker that died is
    /// [`Stop::Closed`], not a SIGPIPE).
    pub(super) fn send(&self, body: &[u8], deadline: Instant) -> Result<(), Stop> {
        let len = u32::try_from(body.len())
            .ok()
            .filter(|&n| u64::from(n) <= LIMIT)
            .ok_or_else(|| Stop::Broken(format!("a request of {} bytes", body.len())))?;
        let mut frame = Vec::with_capacity(4 + body.len());
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(body);
        let mut sent = 0;
        while sent < frame.len() {
            // SAFETY: send(2) reads `frame[sent..]`, a valid slice, on a socket this owns.
            let n = unsafe {
                libc::send(
                    self.socket.as_raw_fd(),
                    frame[sent..].as_ptr().cast(),
                    frame.len() - sent,
                    libc::MSG_NOSIGNAL,
                )
            };
            if n >= 0 {
                sent += n as usize;
                continue;
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::WouldBlock => self.wait(libc::POLLOUT, deadline)?,
                std::io::ErrorKind::Interrupted => {}
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                    return Err(Stop::Closed)
                }
                _ => return Err(Stop::Broken(e.to_string())),
            }
        }
        Ok(())
    }

    /// Receives one frame by `deadline`.
    pub(super) fn receive(&self, deadline: Instant) -> Result<Vec<u8>, Stop> {
        let mut len = [0u8; 4];
        self.fill(&mut len, deadline)?;
        let len = u32::from_le_bytes(len);
        if u64::from(len) > LIMIT {
            return Err(Stop::Broken(format!(
                "it announced a frame of {len} bytes, over the limit of {LIMIT}"
            )));
        }
        let mut body = vec![0u8; len as usize];
        self.fill(&mut body, deadline)?;
        Ok(body)
    }

    fn fill(&self, buf: &mut [u8], deadline: Instant) -> Result<(), Stop> {
        let mut got = 0;
        while got < buf.len() {
            match (&self.socket).read(&mut buf[got..]) {
                Ok(0) => return Err(Stop::Closed),
                Ok(n) => got += n,
                Err(e) => match e.kind() {
                    std::io::ErrorKind::WouldBlock => self.wait(libc::POLLIN, deadline)?,
                    std::io::ErrorKind::Interrupted => {}
                    std::io::ErrorKind::ConnectionReset => return Err(Stop::Closed),
                    _ => return Err(Stop::Broken(e.to_string())),
                },
            }
        }
        Ok(())
    }

    /// Waits until the socket is ready for `events`, at most until `deadline`, checking the
    /// thread's cancellation every 50 ms.
    fn wait(&self, events: libc::c_short, deadline: Instant) -> Result<(), Stop> {
        let cancel = crate::process::cancel::current();
        loop {
            if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
                return Err(Stop::Cancelled);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Stop::TimedOut);
            }
            let tick = (deadline - now).min(Duration::from_millis(50));
            let mut fd = libc::pollfd {
                fd: self.socket.as_raw_fd(),
                events,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut fd, 1, tick.as_millis().max(1) as libc::c_int) };
            if n > 0 {
                // Ready, or hung up / in error: the next read or send tells which.
                return Ok(());
            }
        }
    }
}
