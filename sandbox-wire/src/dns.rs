//! A minimal DNS message codec: just enough to answer the guest's queries.
//!
//! Owns parsing one-question queries, building answers that carry only A
//! records (the forwarder's synthetic addresses), error replies, and, for
//! tests and tools, building queries and reading answers back.
//!
//! Must never: follow compression pointers in a question (no resolver sends
//! them, and they are the classic way to make a parser loop); index past the
//! end of a message (every read is bounds-checked, the input is the guest's).

use std::net::Ipv4Addr;

/// Resource record type A.
pub const TYPE_A: u16 = 1;
/// Resource record type AAAA.
pub const TYPE_AAAA: u16 = 28;
/// Class IN.
pub const CLASS_IN: u16 = 1;

/// Response codes used here.
pub const RCODE_NOERROR: u8 = 0;
pub const RCODE_FORMERR: u8 = 1;
pub const RCODE_SERVFAIL: u8 = 2;
pub const RCODE_NXDOMAIN: u8 = 3;
pub const RCODE_NOTIMP: u8 = 4;
pub const RCODE_REFUSED: u8 = 5;

const HEADER_LEN: usize = 12;
const MAX_NAME_LEN: usize = 255;

/// Why a message could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    #[error("message is truncated")]
    Truncated,
    #[error("message is a response, not a query")]
    NotAQuery,
    #[error("opcode {0} is not a standard query")]
    Opcode(u8),
    #[error("query has {0} questions, expected 1")]
    QuestionCount(u16),
    #[error("question name is malformed")]
    BadName,
    #[error("name {0:?} cannot be encoded")]
    Unencodable(String),
}

/// A parsed one-question query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub id: u16,
    /// Recursion desired, echoed back.
    pub rd: bool,
    /// Lower-case, without the trailing dot; empty for the root.
    pub name: String,
    pub qtype: u16,
    pub qclass: u16,
    /// The question section exactly as sent: echoed back verbatim, because
    /// resolvers that randomise the case of names (0x20) compare it.
    question: Vec<u8>,
}

fn u16_at(msg: &[u8], at: usize) -> Result<u16, DnsError> {
    match msg.get(at..at + 2) {
        Some(b) => Ok(u16::from_be_bytes([b[0], b[1]])),
        None => Err(DnsError::Truncated),
    }
}

/// Parses a query. Errors that still allow a reply (bad opcode, several
/// questions) are reported so the caller can answer with
/// [`error_response`].
pub fn parse_query(msg: &[u8]) -> Result<Query, DnsError> {
    if msg.len() < HEADER_LEN {
        return Err(DnsError::Truncated);
    }
    let id = u16_at(msg, 0)?;
    let flags = u16_at(msg, 2)?;
    if flags & 0x8000 != 0 {
        return Err(DnsError::NotAQuery);
    }
    let opcode = ((flags >> 11) & 0xf) as u8;
    if opcode != 0 {
        return Err(DnsError::Opcode(opcode));
    }
    let qdcount = u16_at(msg, 4)?;
    if qdcount != 1 {
        return Err(DnsError::QuestionCount(qdcount));
    }
    let (name, end) = read_question_name(msg, HEADER_LEN)?;
    let qtype = u16_at(msg, end)?;
    let qclass = u16_at(msg, end + 2)?;
    Ok(Query {
        id,
        rd: flags & 0x0100 != 0,
        name,
        qtype,
        qclass,
        question: msg[HEADER_LEN..end + 4].to_vec(),
    })
}

/// Reads an uncompressed name starting at `at`; returns it and the offset
/// after it. Only host-name characters (and `_`, used by SRV-style labels)
/// are accepted, so the name can be matched and logged as text safely.
fn read_question_name(msg: &[u8], mut at: usize) -> Result<(String, usize), DnsError> {
    let mut name = String::new();
    loop {
        let len = usize::from(*msg.get(at).ok_or(DnsError::Truncated)?);
        at += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            // Compression pointers (0xC0) and the reserved label types.
            return Err(DnsError::BadName);
        }
        let label = msg.get(at..at + len).ok_or(DnsError::Truncated)?;
        if !label.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_') {
            return Err(DnsError::BadName);
        }
        if !name.is_empty() {
            name.push('.');
        }
        name.extend(label.iter().map(|b| char::from(b.to_ascii_lowercase())));
        if name.len() > MAX_NAME_LEN {
            return Err(DnsError::BadName);
        }
        at += len;
    }
    Ok((name, at))
}

fn header(id: u16, rd: bool, rcode: u8, qdcount: u16, ancount: u16) -> Vec<u8> {
    // QR=1, opcode 0, AA=0, TC=0, RD echoed, RA=1: we answer as a
    // recursive resolver would.
    let mut flags: u16 = 0x8000 | 0x0080 | u16::from(rcode & 0xf);
    if rd {
        flags |= 0x0100;
    }
    let mut out = Vec::with_capacity(HEADER_LEN);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&qdcount.to_be_bytes());
    out.extend_from_slice(&ancount.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out
}

/// A reply to `query` with `rcode` and one A record per address.
pub fn response(query: &Query, rcode: u8, answers: &[Ipv4Addr], ttl: u32) -> Vec<u8> {
    // A reply holds at most a handful of synthetic addresses; the cast
    // cannot truncate in practice, and min() keeps it honest if it could.
    let count = answers.len().min(usize::from(u16::MAX));
    let mut out = header(query.id, query.rd, rcode, 1, count as u16);
    out.extend_from_slice(&query.question);
    for addr in &answers[..count] {
        // Pointer to the question name at offset 12.
        out.extend_from_slice(&[0xc0, 0x0c]);
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&addr.octets());
    }
    out
}

/// An error reply built from whatever of `msg` is readable: its id and RD
/// flag. `None` when not even a header is there (nothing to reply to).
pub fn error_response(msg: &[u8], rcode: u8) -> Option<Vec<u8>> {
    if msg.len() < HEADER_LEN {
        return None;
    }
    let id = u16_at(msg, 0).ok()?;
    let flags = u16_at(msg, 2).ok()?;
    if flags & 0x8000 != 0 {
        // Never answer a response: two responders would ping-pong.
        return None;
    }
    match parse_query(msg) {
        Ok(q) => Some(response(&q, rcode, &[], 0)),
        Err(_) => Some(header(id, flags & 0x0100 != 0, rcode, 0, 0)),
    }
}

/// Builds a recursive query for `name` (tests and tools).
pub fn build_query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, DnsError> {
    let mut out = Vec::with_capacity(HEADER_LEN + name.len() + 6);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&0x0100u16.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.').filter(|l| !l.is_empty()) {
        let len = u8::try_from(label.len())
            .ok()
            .filter(|l| *l <= 63)
            .ok_or_else(|| DnsError::Unencodable(name.to_string()))?;
        out.push(len);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(out)
}

/// What a reply said, for tests and tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub id: u16,
    pub rcode: u8,
    /// The A records, in order.
    pub a: Vec<Ipv4Addr>,
    /// How many answer records there were of any type.
    pub ancount: u16,
}

/// Reads a reply's rcode and A records.
pub fn parse_answer(msg: &[u8]) -> Result<Answer, DnsError> {
    if msg.len() < HEADER_LEN {
        return Err(DnsError::Truncated);
    }
    let id = u16_at(msg, 0)?;
    let flags = u16_at(msg, 2)?;
    let qdcount = u16_at(msg, 4)?;
    let ancount = u16_at(msg, 6)?;
    let mut at = HEADER_LEN;
    for _ in 0..qdcount {
        at = skip_name(msg, at)? + 4;
    }
    let mut a = Vec::new();
    for _ in 0..ancount {
        at = skip_name(msg, at)?;
        let rtype = u16_at(msg, at)?;
        let rdlen = usize::from(u16_at(msg, at + 8)?);
        let rdata = msg.get(at + 10..at + 10 + rdlen).ok_or(DnsError::Truncated)?;
        if rtype == TYPE_A && rdlen == 4 {
            a.push(Ipv4Addr::new(rdata[0], rdata[1], rdata[2], rdata[3]));
        }
        at += 10 + rdlen;
    }
    Ok(Answer { id, rcode: (flags & 0xf) as u8, a, ancount })
}

/// Skips a possibly compressed name; a pointer ends it, so no loop.
fn skip_name(msg: &[u8], mut at: usize) -> Result<usize, DnsError> {
    loop {
        let len = *msg.get(at).ok_or(DnsError::Truncated)?;
        if len == 0 {
            return Ok(at + 1);
        }
        if len & 0xc0 == 0xc0 {
            return Ok(at + 2);
        }
        if len > 63 {
            return Err(DnsError::BadName);
        }
        at += 1 + usize::from(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_round_trip() {
        let msg = build_query(0x1234, "Registry.Test.", TYPE_A).expect("encodable");
        let q = parse_query(&msg).expect("parses");
        assert_eq!(q.id, 0x1234);
        assert!(q.rd);
        assert_eq!(q.name, "registry.test");
        assert_eq!(q.qtype, TYPE_A);
        assert_eq!(q.qclass, CLASS_IN);

        let reply = response(&q, RCODE_NOERROR, &[Ipv4Addr::new(198, 18, 0, 1)], 30);
        // The question is echoed with its original case.
        assert!(reply.windows(8).any(|w| w == b"Registry"));
        let ans = parse_answer(&reply).expect("parses");
        assert_eq!(ans.id, 0x1234);
        assert_eq!(ans.rcode, RCODE_NOERROR);
        assert_eq!(ans.a, vec![Ipv4Addr::new(198, 18, 0, 1)]);
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(parse_query(&[0; 5]), Err(DnsError::Truncated));
        let mut msg = build_query(1, "a.test", TYPE_A).expect("encodable");
        // Compression pointer in the question.
        msg[12] = 0xc0;
        assert_eq!(parse_query(&msg), Err(DnsError::BadName));
        let mut msg = build_query(1, "a.test", TYPE_A).expect("encodable");
        msg[13] = b' ';
        assert_eq!(parse_query(&msg), Err(DnsError::BadName));
        let mut msg = build_query(1, "a.test", TYPE_A).expect("encodable");
        msg.truncate(msg.len() - 1);
        assert_eq!(parse_query(&msg), Err(DnsError::Truncated));
        let mut msg = build_query(1, "a.test", TYPE_A).expect("encodable");
        msg[5] = 2;
        assert_eq!(parse_query(&msg), Err(DnsError::QuestionCount(2)));
        // A label that claims more bytes than there are.
        let msg = [0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 40, b'a'];
        assert_eq!(parse_query(&msg), Err(DnsError::Truncated));
    }

    #[test]
    fn error_replies() {
        let msg = build_query(7, "x.test", TYPE_A).expect("encodable");
        let reply = error_response(&msg, RCODE_SERVFAIL).expect("reply");
        let ans = parse_answer(&reply).expect("parses");
        assert_eq!((ans.id, ans.rcode, ans.ancount), (7, RCODE_SERVFAIL, 0));
        assert_eq!(error_response(&[1, 2, 3], RCODE_FORMERR), None);
        // Never answer a response.
        let mut resp = msg.clone();
        resp[2] |= 0x80;
        assert_eq!(error_response(&resp, RCODE_FORMERR), None);
    }
}
