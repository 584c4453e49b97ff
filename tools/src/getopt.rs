//! A small `getopt(3)`-style option parser: single-letter options, option arguments either
//! attached (`-c5`) or separate (`-c 5`), grouped flags (`-ck`), `--` ends the options, and
//! operands may come anywhere (GNU order).

use std::fmt;
use std::str::FromStr;

/// One parsed command-line item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// An option letter and its argument, if the option takes one.
    Opt(char, Option<String>),
    /// An operand (not an option).
    Operand(String),
}

/// What went wrong parsing the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// An option letter not in the specification.
    Unknown(char),
    /// An option that needs an argument came last.
    MissingArgument(char),
    /// An option argument that does not parse.
    BadValue(char, String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unknown(c) => write!(f, "invalid option -- '{c}'"),
            Error::MissingArgument(c) => write!(f, "option requires an argument -- '{c}'"),
            Error::BadValue(c, v) => write!(f, "invalid value '{v}' for -{c}"),
        }
    }
}

impl std::error::Error for Error {}

/// Parses `args` (without the program name) against `spec`, `getopt(3)` syntax: each option
/// letter, followed by `:` if it takes an argument.
pub fn parse<I: IntoIterator<Item = String>>(args: I, spec: &str) -> Result<Vec<Arg>, Error> {
    let takes_arg = |c: char| -> Option<bool> {
        let mut it = spec.chars().peekable();
        while let Some(s) = it.next() {
            let has = it.peek() == Some(&':');
            if has {
                it.next();
            }
            if s == c {
                return Some(has);
            }
        }
        None
    };
    let mut out = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == "--" {
            out.extend(it.by_ref().map(Arg::Operand));
            break;
        }
        if a.len() < 2 || !a.starts_with('-') {
            out.push(Arg::Operand(a));
            continue;
        }
        let body: Vec<char> = a[1..].chars().collect();
        let mut i = 0;
        while i < body.len() {
            let c = body[i];
            match takes_arg(c) {
                None => return Err(Error::Unknown(c)),
                Some(false) => out.push(Arg::Opt(c, None)),
                Some(true) => {
                    let rest: String = body[i + 1..].iter().collect();
                    let v = if rest.is_empty() {
                        it.next().ok_or(Error::MissingArgument(c))?
                    } else {
                        rest
                    };
                    out.push(Arg::Opt(c, Some(v)));
                    break;
                }
            }
            i += 1;
        }
    }
    Ok(out)
}

/// Parses the argument of option `c`.
pub fn value<T: FromStr>(c: char, v: &Option<String>) -> Result<T, Error> {
    let s = v.as_deref().unwrap_or("");
    s.parse().map_err(|_| Error::BadValue(c, s.to_string()))
}

/// Parses a size argument of option `c`: a number with an optional `K`, `M` or `G` suffix
/// (powers of 1024).
pub fn size(c: char, v: &Option<String>) -> Result<u64, Error> {
    let s = v.as_deref().unwrap_or("");
    let bad = || Error::BadValue(c, s.to_string());
    let (num, mult) = match s.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M') => (&s[..s.len() - 1], 1 << 20),
        Some('G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str], spec: &str) -> Result<Vec<Arg>, Error> {
        parse(args.iter().map(|s| s.to_string()), spec)
    }

    #[test]
    fn attached_separate_grouped_and_operands() {
        let r = p(&["-c5", "x", "-i", "0.5", "-kv", "--", "-y"], "c:i:kv").unwrap();
        assert_eq!(
            r,
            vec![
                Arg::Opt('c', Some("5".into())),
                Arg::Operand("x".into()),
                Arg::Opt('i', Some("0.5".into())),
                Arg::Opt('k', None),
                Arg::Opt('v', None),
                Arg::Operand("-y".into()),
            ]
        );
    }

    #[test]
    fn errors() {
        assert_eq!(p(&["-z"], "c:"), Err(Error::Unknown('z')));
        assert_eq!(p(&["-c"], "c:"), Err(Error::MissingArgument('c')));
    }

    #[test]
    fn sizes() {
        assert_eq!(size('q', &Some("16K".into())), Ok(16384));
        assert_eq!(size('q', &Some("1m".into())), Ok(1 << 20));
        assert_eq!(size('q', &Some("64".into())), Ok(64));
        assert!(size('q', &Some("x".into())).is_err());
    }
}
