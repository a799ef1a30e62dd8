//! The guest↔host egress wire protocol and the guest's way to reach the host.
//!
//! Owns the two vsock ports, their framing, and [`GuestConnector`], which
//! opens a stream from the guest to a host port: AF_VSOCK in production,
//! a Unix socket `<base>_<port>` in tests (the same path the VMM's hybrid
//! vsock delivers guest-initiated connections to).
//!
//! - DNS ([`DNS_PORT`]): any number of `u16` big-endian length + DNS message
//!   frames, each answered by one frame, on one connection.
//! - TCP ([`TCP_PORT`]): the guest sends `CONNECT <ip>:<port>\n` (the
//!   connection's original destination); the host answers `OK\n` and then
//!   bytes flow both ways, or `DENY <rule>\n` (policy) or `ERR <reason>\n`
//!   (allowed but the upstream could not be reached) and closes.
//!
//! Must never read past a control line into the spliced byte stream without
//! handing those bytes on (readers here are buffered and passed along).

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Host vsock port of the DNS forwarder.
pub const DNS_PORT: u32 = 1053;
/// Host vsock port of the TCP forwarder.
pub const TCP_PORT: u32 = 1080;
/// Host vsock port of the capability broker's terminator: the guest's one
/// path to the broker, outside the egress policy. The host listens on it
/// only for runs granted a connection.
pub const BROKER_PORT: u32 = 1480;
/// The guest's loopback port that carries connections to [`BROKER_PORT`]:
/// `PATCHPILOT_BROKER_URL` is `http://127.0.0.1:4480`. Loopback only, so
/// a container the agent builds cannot reach it.
pub const BROKER_GUEST_PORT: u16 = 4480;
/// The longest control line accepted (`CONNECT [v6]:port` fits easily).
pub const MAX_LINE: usize = 256;

/// A bidirectional byte stream that can be boxed.
pub trait AsyncReadWrite: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> AsyncReadWrite for T {}

/// Opens a stream from the guest to a host port.
#[async_trait]
pub trait GuestConnector: Send + Sync + fmt::Debug {
    async fn connect(&self, port: u32) -> io::Result<Box<dyn AsyncReadWrite>>;
}

/// AF_VSOCK to the host (CID 2), as used inside the microVM.
#[derive(Debug, Clone, Copy)]
pub struct VsockConnector {
    pub cid: u32,
}

impl Default for VsockConnector {
    fn default() -> Self {
        VsockConnector { cid: tokio_vsock::VMADDR_CID_HOST }
    }
}

#[async_trait]
impl GuestConnector for VsockConnector {
    async fn connect(&self, port: u32) -> io::Result<Box<dyn AsyncReadWrite>> {
        let stream = tokio_vsock::VsockStream::connect(tokio_vsock::VsockAddr::new(self.cid, port)).await?;
        Ok(Box::new(stream))
    }
}

/// Connects to the Unix socket `<base>_<port>`: the host end of hybrid
/// vsock, so tests can play the guest without a VM.
#[derive(Debug, Clone)]
pub struct UnixConnector {
    pub base: PathBuf,
}

#[async_trait]
impl GuestConnector for UnixConnector {
    async fn connect(&self, port: u32) -> io::Result<Box<dyn AsyncReadWrite>> {
        let stream = tokio::net::UnixStream::connect(port_socket_path(&self.base, port)).await?;
        Ok(Box::new(stream))
    }
}

/// `<base>_<port>`: where the VMM delivers guest connections to `port`.
pub fn port_socket_path(base: &Path, port: u32) -> PathBuf {
    let mut os = base.as_os_str().to_owned();
    os.push(format!("_{port}"));
    PathBuf::from(os)
}

/// Writes one length-prefixed DNS message.
pub async fn write_dns_frame<W: AsyncWrite + Unpin + ?Sized>(w: &mut W, msg: &[u8]) -> io::Result<()> {
    let len = u16::try_from(msg.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "DNS message longer than 65535 bytes"))?;
    let mut frame = Vec::with_capacity(msg.len() + 2);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(msg);
    // One write, so a frame never straddles two vsock packets needlessly.
    w.write_all(&frame).await?;
    w.flush().await
}

/// Reads one length-prefixed DNS message; `None` on a clean end of stream
/// between frames.
pub async fn read_dns_frame<R: AsyncRead + Unpin + ?Sized>(r: &mut R) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 2];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    r.read_exact(&mut msg).await?;
    Ok(Some(msg))
}

/// The guest's request on [`TCP_PORT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectRequest {
    pub dest: SocketAddr,
}

impl ConnectRequest {
    /// The line sent on the wire.
    pub fn encode(&self) -> String {
        format!("CONNECT {}\n", self.dest)
    }

    /// Parses a line (without its newline).
    pub fn parse(line: &str) -> Option<ConnectRequest> {
        let dest = line.strip_prefix("CONNECT ")?.parse().ok()?;
        Some(ConnectRequest { dest })
    }
}

/// The host's answer to a [`ConnectRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectReply {
    Ok,
    /// Refused by policy; carries the rule.
    Deny(String),
    /// Allowed, but the upstream could not be reached.
    Err(String),
}

impl ConnectReply {
    /// The line sent on the wire.
    pub fn encode(&self) -> String {
        match self {
            ConnectReply::Ok => "OK\n".to_string(),
            ConnectReply::Deny(rule) => format!("DENY {}\n", one_line(rule)),
            ConnectReply::Err(reason) => format!("ERR {}\n", one_line(reason)),
        }
    }

    /// Parses a line (without its newline).
    pub fn parse(line: &str) -> Option<ConnectReply> {
        if line == "OK" {
            Some(ConnectReply::Ok)
        } else if let Some(rule) = line.strip_prefix("DENY ") {
            Some(ConnectReply::Deny(rule.to_string()))
        } else {
            line.strip_prefix("ERR ").map(|r| ConnectReply::Err(r.to_string()))
        }
    }
}

/// Keeps a free-text field on one line so it cannot forge a second one.
fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// Reads one `\n`-terminated line of at most `max` bytes from a buffered
/// reader, leaving any following bytes in its buffer. `None` on end of
/// stream before any byte.
pub async fn read_line<R: AsyncBufRead + Unpin + ?Sized>(
    r: &mut R,
    max: usize,
) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            if line.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "stream ended inside a control line"));
        }
        let (taken, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..taken]);
        r.consume(taken);
        if line.len() > max + 1 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "control line too long"));
        }
        if done {
            line.pop();
            return String::from_utf8(line)
                .map(Some)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "control line is not UTF-8"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    #[test]
    fn lines_round_trip() {
        let req = ConnectRequest { dest: "198.18.0.1:443".parse().expect("addr") };
        assert_eq!(req.encode(), "CONNECT 198.18.0.1:443\n");
        assert_eq!(ConnectRequest::parse("CONNECT 198.18.0.1:443"), Some(req));
        assert_eq!(ConnectRequest::parse("CONNECT host:443"), None);
        assert_eq!(ConnectRequest::parse("GET / HTTP/1.1"), None);
        assert_eq!(ConnectReply::parse("OK"), Some(ConnectReply::Ok));
        assert_eq!(ConnectReply::Deny("private".into()).encode(), "DENY private\n");
        assert_eq!(ConnectReply::Deny("a\nOK".into()).encode(), "DENY a OK\n");
        assert_eq!(ConnectReply::parse("DENY loopback"), Some(ConnectReply::Deny("loopback".into())));
        assert_eq!(ConnectReply::parse("ERR refused"), Some(ConnectReply::Err("refused".into())));
        assert_eq!(ConnectReply::parse("OKAY"), None);
    }

    #[tokio::test]
    async fn read_line_keeps_following_bytes() {
        let data: &[u8] = b"OK\nhello";
        let mut r = BufReader::new(data);
        assert_eq!(read_line(&mut r, MAX_LINE).await.expect("line"), Some("OK".to_string()));
        let mut rest = String::new();
        r.read_to_string(&mut rest).await.expect("rest");
        assert_eq!(rest, "hello");

        let long = vec![b'a'; MAX_LINE + 10];
        let mut r = BufReader::new(&long[..]);
        assert!(read_line(&mut r, MAX_LINE).await.is_err());
        let mut r = BufReader::new(&b""[..]);
        assert_eq!(read_line(&mut r, MAX_LINE).await.expect("eof"), None);
    }

    #[tokio::test]
    async fn dns_frames() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        write_dns_frame(&mut a, b"abc").await.expect("write");
        drop(a);
        assert_eq!(read_dns_frame(&mut b).await.expect("read"), Some(b"abc".to_vec()));
        assert_eq!(read_dns_frame(&mut b).await.expect("eof"), None);
    }

    #[test]
    fn socket_paths() {
        assert_eq!(
            port_socket_path(Path::new("/run/vm/vsock.sock"), DNS_PORT),
            PathBuf::from("/run/vm/vsock.sock_1053")
        );
    }
}
