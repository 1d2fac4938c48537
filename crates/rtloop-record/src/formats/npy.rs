//! The few `.npy` files an Open Ephys recording holds (sample numbers, TTL states, text
//! events): numpy's format 1.0-3.0, one-dimensional, little-endian integers and floats,
//! and fixed-width byte or unicode strings.

/// A one-dimensional array read from an `.npy` file.
#[derive(Debug, Clone, PartialEq)]
pub enum Npy {
    /// Any integer dtype (`<i8`, `<i4`, `<i2`, `|i1`, `<u8`, `<u4`, `<u2`, `|u1`), widened.
    Int(Vec<i64>),
    /// `<f8` or `<f4`, widened.
    Float(Vec<f64>),
    /// `|S<n>` (UTF-8 lossy) or `<U<n>`, trailing NULs removed.
    Text(Vec<String>),
}

impl Npy {
    /// The number of elements.
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Npy::Int(v) => v.len(),
            Npy::Float(v) => v.len(),
            Npy::Text(v) => v.len(),
        }
    }

    /// Whether it has no elements.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as integers (floats truncated; text is refused).
    #[must_use]
    pub fn ints(&self) -> Option<Vec<i64>> {
        match self {
            Npy::Int(v) => Some(v.clone()),
            Npy::Float(v) => Some(v.iter().map(|&x| x as i64).collect()),
            Npy::Text(_) => None,
        }
    }
}

/// The header of an `.npy` file: its dtype, shape and where the data starts.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyHeader {
    /// numpy's `descr` (`"<i8"`, `"|S12"`, ...).
    pub descr: String,
    /// The shape.
    pub shape: Vec<u64>,
    /// Byte offset of the data.
    pub data_offset: usize,
}

fn field<'a>(dict: &'a str, key: &str) -> Option<&'a str> {
    let at = dict.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = dict[at..].trim_start().strip_prefix(':')?.trim_start();
    Some(rest)
}

/// Parse the header of an `.npy` file.
///
/// # Errors
/// What is wrong with it, as text (the caller names the file).
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a numpy .npy file (no \\x93NUMPY magic)".into());
    }
    let major = bytes[6];
    let (len, start): (usize, usize) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        _ => return Err(format!(".npy format version {major} (allowed: 1, 2, 3)")),
    };
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or("the .npy header is truncated")?;
    let dict =
        std::str::from_utf8(&bytes[start..end]).map_err(|_| "the .npy header is not text")?;
    let descr = field(dict, "descr")
        .and_then(|r| {
            let q = r.chars().next()?;
            let r = &r[q.len_utf8()..];
            Some(r[..r.find(q)?].to_owned())
        })
        .ok_or("the .npy header has no 'descr'")?;
    if field(dict, "fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err("a Fortran-ordered .npy array (allowed: C order)".into());
    }
    let shape_text = field(dict, "shape")
        .and_then(|r| {
            let r = &r[r.find('(')? + 1..];
            Some(&r[..r.find(')')?])
        })
        .ok_or("the .npy header has no 'shape'")?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<u64>())
        .collect::<Result<Vec<u64>, _>>()
        .map_err(|_| format!("the .npy shape ({shape_text}) is not a list of integers"))?;
    Ok(NpyHeader {
        descr,
        shape,
        data_offset: end,
    })
}

/// Read a one-dimensional (or `(n, 1)`) array.
///
/// # Errors
/// What is wrong, as text: not an `.npy` file, a dtype or shape it does not read, or fewer
/// bytes than the shape says.
pub fn parse(bytes: &[u8]) -> Result<Npy, String> {
    let h = parse_header(bytes)?;
    let n = match h.shape.as_slice() {
        [] => 1,
        [n] | [n, 1] => *n,
        other => {
            return Err(format!(
                "a .npy array of shape {other:?} (allowed: one-dimensional)"
            ))
        }
    };
    let data = &bytes[h.data_offset..];
    let d = h.descr.as_str();
    let (order, kind, width) = match d.as_bytes() {
        [o @ (b'<' | b'|' | b'='), k, rest @ ..] => (
            *o,
            *k,
            std::str::from_utf8(rest)
                .ok()
                .and_then(|w| w.parse::<usize>().ok())
                .ok_or_else(|| format!("the .npy dtype {d:?} is not one rtloop reads"))?,
        ),
        _ => {
            return Err(format!(
                "the .npy dtype {d:?} is not one rtloop reads (allowed: little-endian integers, floats, S and U strings)"
            ))
        }
    };
    let _ = order;
    let item = if kind == b'U' {
        width
            .checked_mul(4)
            .ok_or("the .npy item size is too large")?
    } else {
        width
    };
    let need = (n as usize)
        .checked_mul(item)
        .ok_or("the .npy shape is too large")?;
    if data.len() < need {
        return Err(format!(
            "the .npy data is truncated: {} bytes for {n} items of {item} bytes",
            data.len()
        ));
    }
    let items = data[..need].chunks_exact(item.max(1));
    let int = |c: &[u8], signed: bool| -> i64 {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        if signed && c.last().is_some_and(|x| x & 0x80 != 0) {
            for x in &mut b[c.len()..] {
                *x = 0xff;
            }
        }
        i64::from_le_bytes(b)
    };
    Ok(match (kind, width) {
        (b'i', 1 | 2 | 4 | 8) => Npy::Int(items.map(|c| int(c, true)).collect()),
        (b'u', 1 | 2 | 4 | 8) => Npy::Int(items.map(|c| int(c, false)).collect()),
        (b'f', 8) => Npy::Float(
            items
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        ),
        (b'f', 4) => Npy::Float(
            items
                .map(|c| f64::from(f32::from_le_bytes(c.try_into().expect("4 bytes"))))
                .collect(),
        ),
        (b'S', _) => Npy::Text(
            items
                .map(|c| {
                    let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
                    String::from_utf8_lossy(&c[..end]).into_owned()
                })
                .collect(),
        ),
        (b'U', _) => Npy::Text(
            items
                .map(|c| {
                    c.chunks_exact(4)
                        .map(|u| u32::from_le_bytes(u.try_into().expect("4 bytes")))
                        .take_while(|&u| u != 0)
                        .map(|u| char::from_u32(u).unwrap_or('\u{fffd}'))
                        .collect()
                })
                .collect(),
        ),
        _ => {
            return Err(format!(
                "the .npy dtype {d:?} is not one rtloop reads (allowed: little-endian integers, floats, S and U strings)"
            ))
        }
    })
}

/// An `.npy` file (format 1.0) of `descr` with shape text `shape` (`"(3,)"`) holding
/// `data`, as numpy writes it (for tests and fuzz seeds).
#[must_use]
pub fn encode(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    b.extend_from_slice(dict.as_bytes());
    b.extend_from_slice(data);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        encode(descr, shape, data)
    }

    #[test]
    fn reads_integers_floats_and_text() {
        let d: Vec<u8> = [5i64, -3, 1 << 40]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(
            parse(&npy("<i8", "(3,)", &d)).unwrap(),
            Npy::Int(vec![5, -3, 1 << 40])
        );
        let d: Vec<u8> = [1i16, -2].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(
            parse(&npy("<i2", "(2,)", &d)).unwrap(),
            Npy::Int(vec![1, -2])
        );
        let d: Vec<u8> = [0.5f64].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(
            parse(&npy("<f8", "(1,)", &d)).unwrap(),
            Npy::Float(vec![0.5])
        );
        assert_eq!(
            parse(&npy("|S4", "(2,)", b"ab\0\0wxyz")).unwrap(),
            Npy::Text(vec!["ab".into(), "wxyz".into()])
        );
        let u: Vec<u8> = ['h', 'i', '\0']
            .iter()
            .flat_map(|c| (*c as u32).to_le_bytes())
            .collect();
        assert_eq!(
            parse(&npy("<U3", "(1,)", &u)).unwrap(),
            Npy::Text(vec!["hi".into()])
        );
        assert_eq!(parse(&npy("<i8", "(0,)", &[])).unwrap(), Npy::Int(vec![]));
    }

    #[test]
    fn refuses_what_it_does_not_read() {
        assert!(parse(b"not numpy").unwrap_err().contains("magic"));
        assert!(parse(&npy("<i8", "(3,)", &[0; 16]))
            .unwrap_err()
            .contains("truncated"));
        assert!(parse(&npy(">i8", "(1,)", &[0; 8]))
            .unwrap_err()
            .contains("not one rtloop reads"));
        assert!(parse(&npy("<i8", "(2, 2)", &[0; 32]))
            .unwrap_err()
            .contains("one-dimensional"));
        let mut b = npy("<i8", "(1,)", &[0; 8]);
        b.truncate(20);
        assert!(parse(&b).unwrap_err().contains("header is truncated"));
    }
}
