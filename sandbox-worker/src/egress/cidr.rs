//! CIDR networks: parsing, membership and containment.
//!
//! Owns the tiny amount of address arithmetic the egress gate needs, so the
//! policy does not pull in a networking crate. Must never accept a network
//! whose host bits are set: `10.0.0.1/8` is almost always a typo, and
//! silently widening it would allow more than the operator wrote.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An IPv4 or IPv6 network such as `10.0.0.0/8` or `fd00::/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// Why a CIDR string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error("is not an address/prefix pair")]
    Syntax,
    #[error("has an invalid address")]
    Address,
    #[error("has a prefix longer than the address")]
    Prefix,
    #[error("has host bits set (did you mean {0}?)")]
    HostBits(Cidr),
}

impl Cidr {
    /// A network from an address and prefix; `None` when the prefix is too
    /// long or host bits are set.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Cidr> {
        let cidr = Cidr { addr, prefix };
        if prefix > cidr.max_prefix() || cidr.network() != addr {
            return None;
        }
        Some(cidr)
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    fn max_prefix(&self) -> u8 {
        match self.addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        }
    }

    /// The address with host bits cleared.
    fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => IpAddr::V4(mask_v4(u32::from(a), self.prefix).into()),
            IpAddr::V6(a) => IpAddr::V6(mask_v6(u128::from(a), self.prefix).into()),
        }
    }

    /// Whether `ip` is inside this network. Families never match each other:
    /// v4-mapped v6 addresses are unmapped by the caller first, so that one
    /// place decides how they are treated.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => mask_v4(u32::from(ip), self.prefix) == u32::from(net),
            (IpAddr::V6(net), IpAddr::V6(ip)) => mask_v6(u128::from(ip), self.prefix) == u128::from(net),
            _ => false,
        }
    }

    /// Whether every address of `self` is inside `other`.
    pub fn is_within(&self, other: &Cidr) -> bool {
        self.prefix >= other.prefix && other.contains(self.addr)
    }
}

fn mask_v4(bits: u32, prefix: u8) -> u32 {
    if prefix == 0 { 0 } else { bits & (u32::MAX << (32 - u32::from(prefix))) }
}

fn mask_v6(bits: u128, prefix: u8) -> u128 {
    if prefix == 0 { 0 } else { bits & (u128::MAX << (128 - u32::from(prefix))) }
}

impl FromStr for Cidr {
    type Err = CidrError;

    /// Parses `addr/prefix`; a bare address means a single host (`/32`,
    /// `/128`), which is how operators usually name one machine.
    fn from_str(s: &str) -> Result<Cidr, CidrError> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| CidrError::Address)?;
        let max = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        let prefix = match prefix {
            None => max,
            Some(p) => {
                // `u8::from_str` accepts "+8"; be strict so the stored text
                // round-trips.
                if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(CidrError::Syntax);
                }
                p.parse::<u8>().map_err(|_| CidrError::Prefix)?
            }
        };
        if prefix > max {
            return Err(CidrError::Prefix);
        }
        let cidr = Cidr { addr, prefix };
        if cidr.network() != addr {
            return Err(CidrError::HostBits(Cidr { addr: cidr.network(), prefix }));
        }
        Ok(cidr)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn parses_and_contains() {
        let net: Cidr = "10.0.0.0/8".parse().expect("valid");
        assert!(net.contains(ip("10.255.1.2")));
        assert!(!net.contains(ip("11.0.0.1")));
        assert!(!net.contains(ip("::1")));
        let host: Cidr = "192.0.2.7".parse().expect("valid");
        assert_eq!(host.prefix(), 32);
        assert!(host.contains(ip("192.0.2.7")));
        assert!(!host.contains(ip("192.0.2.8")));
        let all: Cidr = "0.0.0.0/0".parse().expect("valid");
        assert!(all.contains(ip("203.0.113.7")));
        let v6: Cidr = "fd00:ec2::/32".parse().expect("valid");
        assert!(v6.contains(ip("fd00:ec2::254")));
        assert_eq!(v6.to_string(), "fd00:ec2::/32");
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(
            "10.0.0.1/8".parse::<Cidr>().map_err(|e| e.to_string()),
            Err("has host bits set (did you mean 10.0.0.0/8?)".to_string())
        );
        assert_eq!("10.0.0.0/33".parse::<Cidr>(), Err(CidrError::Prefix));
        assert_eq!("10.0.0.0/+8".parse::<Cidr>(), Err(CidrError::Syntax));
        assert_eq!("10.0.0.0/".parse::<Cidr>(), Err(CidrError::Syntax));
        assert_eq!("example.com/8".parse::<Cidr>(), Err(CidrError::Address));
    }

    #[test]
    fn within() {
        let a: Cidr = "10.1.0.0/16".parse().expect("valid");
        let b: Cidr = "10.0.0.0/8".parse().expect("valid");
        assert!(a.is_within(&b));
        assert!(!b.is_within(&a));
    }
}
