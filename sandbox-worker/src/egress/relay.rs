//! The bytes of one allowed connection, both ways between the guest's
//! connection and its upstream, after the gate allowed it and the dial
//! succeeded.
//!
//! Each direction is a splice(2) through a pipe of its own: the bytes go
//! from one socket's receive queue to the other's send queue as page
//! references, never through a user-space buffer. A user-space copy
//! through a 64 KiB buffer stands in where no pipe can be had (the
//! process is out of descriptors) or the kernel refuses to splice these
//! sockets (an old kernel, a seccomp filter); refused, a direction goes on
//! with the copy from where it stood, losing nothing.
//!
//! Same contract as tokio's `copy_bidirectional`, which this replaces: when
//! one side ends its stream, the other side's write half is shut down and
//! the other direction goes on; the first error in either direction ends
//! both.

use std::future::Future;
use std::io;
use std::os::fd::{AsFd, AsRawFd as _, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{OFlag, SpliceFFlags, splice};
use nix::sys::socket::{Shutdown, shutdown};
use tokio::io::{Interest, Ready};
use tokio::net::{TcpStream, UnixStream};

/// Most a single splice asks for; the pipe's capacity (64 KiB by default)
/// is the real bound, this only avoids asking for less.
const SPLICE_MAX: usize = 1 << 20;
/// The user-space fallback's buffer: eight times tokio's default of 8 KiB,
/// which made the forwarder do a read and a write per 8 KiB.
const COPY_BUFFER: usize = 64 << 10;

/// How a direction moves its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// splice(2), with the copy as the fallback.
    Splice,
    /// The user-space copy only (tests of the fallback).
    #[cfg_attr(not(test), allow(dead_code))]
    Copy,
}

/// Relays until both directions have ended. `early` are bytes the guest
/// sent right behind its CONNECT line, already read off its socket: they
/// go upstream first.
pub(crate) async fn relay(
    guest: &UnixStream,
    early: &[u8],
    upstream: &TcpStream,
    mode: Mode,
) -> io::Result<()> {
    tokio::try_join!(direction(guest, early, upstream, mode), direction(upstream, &[], guest, mode))?;
    Ok(())
}

/// One direction: `from`'s bytes into `to` until `from` ends, then shuts
/// `to`'s write half so its reader sees the end too.
async fn direction(from: &impl Socket, early: &[u8], to: &impl Socket, mode: Mode) -> io::Result<()> {
    write_all(to, early).await?;
    let pipe = match mode {
        Mode::Splice => Pipe::new().ok(),
        Mode::Copy => None,
    };
    let stranded = match pipe {
        Some(pipe) => match splice_all(from, to, &pipe).await? {
            Spliced::ToEnd => None,
            Spliced::Refused { stranded } => Some(stranded),
        },
        None => Some(Vec::new()),
    };
    if let Some(stranded) = stranded {
        write_all(to, &stranded).await?;
        copy_all(from, to).await?;
    }
    shutdown(to.as_fd().as_raw_fd(), Shutdown::Write)?;
    Ok(())
}

/// A pipe, both ends non-blocking: the sockets' readiness is what the relay
/// waits on, so a pipe operation must never block the runtime's thread.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
        Ok(Pipe { read, write })
    }
}

enum Spliced {
    /// `from` ended; everything it sent is in `to`.
    ToEnd,
    /// The kernel will not splice these descriptors. `stranded` are bytes
    /// already in the pipe that are not in `to` yet.
    Refused { stranded: Vec<u8> },
}

async fn splice_all(from: &impl Socket, to: &impl Socket, pipe: &Pipe) -> io::Result<Spliced> {
    let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
    loop {
        // The pipe is empty here, so EAGAIN can only mean `from` has
        // nothing to read: the readiness `when_ready` clears is the right one.
        let filled = match when_ready(from, Interest::READABLE, || {
            Ok(splice(from.as_fd(), None, pipe.write.as_fd(), None, SPLICE_MAX, flags)?)
        })
        .await
        {
            Ok(0) => return Ok(Spliced::ToEnd),
            Ok(n) => n,
            Err(e) if refused(&e) => return Ok(Spliced::Refused { stranded: Vec::new() }),
            Err(e) => return Err(e),
        };
        let mut in_pipe = filled;
        while in_pipe > 0 {
            // The pipe holds bytes here, so EAGAIN can only mean `to` is full.
            match when_ready(to, Interest::WRITABLE, || {
                Ok(splice(pipe.read.as_fd(), None, to.as_fd(), None, in_pipe, flags)?)
            })
            .await
            {
                Ok(n) => in_pipe -= n,
                Err(e) if refused(&e) => return Ok(Spliced::Refused { stranded: drain(pipe, in_pipe)? }),
                Err(e) => return Err(e),
            }
        }
    }
}

/// Whether an error says splice cannot be used on these descriptors, as
/// opposed to the connection failing.
fn refused(e: &io::Error) -> bool {
    matches!(e.raw_os_error().map(Errno::from_raw), Some(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP))
}

/// Reads the `len` bytes the pipe holds.
fn drain(pipe: &Pipe, len: usize) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0; len];
    let mut got = 0;
    while got < len {
        match nix::unistd::read(pipe.read.as_raw_fd(), &mut bytes[got..])? {
            0 => break,
            n => got += n,
        }
    }
    bytes.truncate(got);
    Ok(bytes)
}

async fn copy_all(from: &impl Socket, to: &impl Socket) -> io::Result<()> {
    let mut buffer = vec![0; COPY_BUFFER];
    loop {
        let n = when_ready(from, Interest::READABLE, || from.try_read(&mut buffer)).await?;
        if n == 0 {
            return Ok(());
        }
        write_all(to, &buffer[..n]).await?;
    }
}

async fn write_all(to: &impl Socket, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        let n = when_ready(to, Interest::WRITABLE, || to.try_write(bytes)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
    }
    Ok(())
}

/// Runs `op` once `socket` is ready for `interest`, again after each
/// EAGAIN, which also tells tokio the readiness it reported is gone.
async fn when_ready<T>(
    socket: &impl Socket,
    interest: Interest,
    mut op: impl FnMut() -> io::Result<T>,
) -> io::Result<T> {
    loop {
        socket.ready(interest).await?;
        match socket.try_io(interest, &mut op) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            done => return done,
        }
    }
}

/// What the relay needs of a tokio socket, all through `&self` so that
/// both directions can use both sockets at once.
trait Socket: AsFd + Sync {
    fn ready(&self, interest: Interest) -> impl Future<Output = io::Result<Ready>> + Send;
    fn try_io<T>(&self, interest: Interest, op: impl FnOnce() -> io::Result<T>) -> io::Result<T>;
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn try_write(&self, buf: &[u8]) -> io::Result<usize>;
}

macro_rules! socket {
    ($type:ty) => {
        impl Socket for $type {
            fn ready(&self, interest: Interest) -> impl Future<Output = io::Result<Ready>> + Send {
                <$type>::ready(self, interest)
            }
            fn try_io<T>(&self, interest: Interest, op: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
                <$type>::try_io(self, interest, op)
            }
            fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
                <$type>::try_read(self, buf)
            }
            fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
                <$type>::try_write(self, buf)
            }
        }
    };
}

socket!(TcpStream);
socket!(UnixStream);

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    /// A relay between a Unix socket pair's far end and a loopback TCP
    /// connection's far end; returns the near ends (guest, upstream).
    async fn relayed(mode: Mode) -> (UnixStream, TcpStream, tokio::task::JoinHandle<io::Result<()>>) {
        let (guest_near, guest_far) = UnixStream::pair().expect("socket pair");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let upstream_far = TcpStream::connect(listener.local_addr().expect("addr")).await.expect("connect");
        let (upstream_near, _) = listener.accept().await.expect("accept");
        let task = tokio::spawn(async move { relay(&guest_far, b"early ", &upstream_far, mode).await });
        (guest_near, upstream_near, task)
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    async fn both_ways_with_half_close(mode: Mode) {
        let (mut guest, mut upstream, task) = relayed(mode).await;
        // More than a pipe and more than the socket buffers hold, so both
        // directions wait on readiness many times.
        let up = pattern(3 << 20);
        let down = pattern(5 << 20);
        let up_sent = up.clone();
        let guest_side = async move {
            let (mut r, mut w) = guest.split();
            let send = async {
                w.write_all(&up_sent).await.expect("guest writes");
                w.shutdown().await.expect("guest shuts its write half");
            };
            let mut got = Vec::new();
            let receive = r.read_to_end(&mut got);
            let ((), received) = tokio::join!(send, receive);
            received.expect("guest reads");
            got
        };
        let upstream_side = async move {
            let (mut r, mut w) = upstream.split();
            let mut got = Vec::new();
            // Reads the guest's whole stream before answering: the
            // guest's end of stream must reach upstream while the other
            // direction is still open.
            r.read_to_end(&mut got).await.expect("upstream reads");
            w.write_all(&down).await.expect("upstream writes");
            w.shutdown().await.expect("upstream shuts its write half");
            (got, down)
        };
        let (at_guest, (at_upstream, down)) = tokio::join!(guest_side, upstream_side);
        assert_eq!(&at_upstream[..6], b"early ");
        assert!(at_upstream[6..] == up[..], "guest to upstream bytes differ");
        assert!(at_guest == down, "upstream to guest bytes differ");
        task.await.expect("relay task").expect("relay ends cleanly");
    }

    #[tokio::test]
    async fn splice_moves_every_byte_both_ways_and_passes_on_half_close() {
        both_ways_with_half_close(Mode::Splice).await;
    }

    #[tokio::test]
    async fn copy_fallback_moves_every_byte_both_ways_and_passes_on_half_close() {
        both_ways_with_half_close(Mode::Copy).await;
    }
}
