//! FieldTrip-style events beside the samples: type, value, sample, offset, duration, in a
//! ring of fixed 512-byte slots with the same publish/validate protocol as the samples.

use crate::layout::{EventSlotHeader, EVENT_PAYLOAD_MAX, EVENT_SLOT_BYTES};
use crate::DType;

/// FieldTrip's code for a character (text) value.
pub const CHAR_CODE: u32 = 0;

/// An event's `type` or `value`: text or a typed array, as FieldTrip allows.
#[derive(Debug, Clone, PartialEq)]
pub enum EventValue {
    /// Text (FieldTrip `char`).
    Text(String),
    /// A numeric array: `bytes` holds values of `dtype` in native byte order.
    Array {
        /// Value type.
        dtype: DType,
        /// The values' bytes.
        bytes: Vec<u8>,
    },
}

impl EventValue {
    /// FieldTrip type code.
    #[must_use]
    pub fn code(&self) -> u32 {
        match self {
            EventValue::Text(_) => CHAR_CODE,
            EventValue::Array { dtype, .. } => dtype.code(),
        }
    }

    /// The raw bytes.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        match self {
            EventValue::Text(s) => s.as_bytes(),
            EventValue::Array { bytes, .. } => bytes,
        }
    }

    /// One float64.
    #[must_use]
    pub fn f64(x: f64) -> Self {
        EventValue::Array {
            dtype: DType::F64,
            bytes: x.to_ne_bytes().to_vec(),
        }
    }

    /// One int64.
    #[must_use]
    pub fn i64(x: i64) -> Self {
        EventValue::Array {
            dtype: DType::I64,
            bytes: x.to_ne_bytes().to_vec(),
        }
    }

    /// The text, if this is text.
    #[must_use]
    pub fn as_text(&self) -> Option<&str> {
        match self {
            EventValue::Text(s) => Some(s),
            EventValue::Array { .. } => None,
        }
    }

    /// The values as float64, if this is numeric.
    #[must_use]
    pub fn to_f64s(&self) -> Option<Vec<f64>> {
        let EventValue::Array { dtype, bytes } = self else {
            return None;
        };
        let it = bytes.chunks_exact(dtype.itemsize());
        macro_rules! conv {
            ($t:ty) => {
                it.map(|c| <$t>::from_ne_bytes(c.try_into().expect("itemsize")) as f64)
                    .collect()
            };
        }
        Some(match dtype {
            DType::U8 => conv!(u8),
            DType::U16 => conv!(u16),
            DType::U32 => conv!(u32),
            DType::U64 => conv!(u64),
            DType::I8 => conv!(i8),
            DType::I16 => conv!(i16),
            DType::I32 => conv!(i32),
            DType::I64 => conv!(i64),
            DType::F32 => conv!(f32),
            DType::F64 => conv!(f64),
        })
    }
}

impl From<&str> for EventValue {
    fn from(s: &str) -> Self {
        EventValue::Text(s.to_owned())
    }
}

/// One event (FieldTrip's `type`, `value`, `sample`, `offset`, `duration`).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// FieldTrip's `type` (for example `"trigger"`).
    pub kind: EventValue,
    /// FieldTrip's `value`.
    pub value: EventValue,
    /// The sample the event refers to (absolute index).
    pub sample: u64,
    /// Offset in samples from `sample`.
    pub offset: i64,
    /// Duration in samples.
    pub duration: u64,
    /// CLOCK_MONOTONIC ns when it was pushed (set by the writer).
    pub stamp_ns: u64,
}

impl Event {
    /// An event of `kind` and `value` at `sample`, no offset or duration.
    pub fn new(kind: impl Into<EventValue>, value: impl Into<EventValue>, sample: u64) -> Self {
        Event {
            kind: kind.into(),
            value: value.into(),
            sample,
            offset: 0,
            duration: 0,
            stamp_ns: 0,
        }
    }

    /// Bytes of type + value.
    #[must_use]
    pub fn payload_bytes(&self) -> usize {
        self.kind.bytes().len() + self.value.bytes().len()
    }

    /// Encode into one slot. Caller checked `payload_bytes() <= EVENT_PAYLOAD_MAX`.
    pub(crate) fn encode(&self, stamp_ns: u64, slot: &mut [u8; EVENT_SLOT_BYTES]) {
        let (t, v) = (self.kind.bytes(), self.value.bytes());
        let h = EventSlotHeader {
            type_code: self.kind.code(),
            type_bytes: t.len() as u32,
            value_code: self.value.code(),
            value_bytes: v.len() as u32,
            sample: self.sample,
            offset: self.offset,
            duration: self.duration,
            stamp_ns,
        };
        let hb = std::mem::size_of::<EventSlotHeader>();
        let fields: [u64; 6] = [
            u64::from(h.type_code) | (u64::from(h.type_bytes) << 32),
            u64::from(h.value_code) | (u64::from(h.value_bytes) << 32),
            h.sample,
            h.offset as u64,
            h.duration,
            h.stamp_ns,
        ];
        for (i, f) in fields.iter().enumerate() {
            slot[i * 8..i * 8 + 8].copy_from_slice(&f.to_ne_bytes());
        }
        slot[hb..hb + t.len()].copy_from_slice(t);
        slot[hb + t.len()..hb + t.len() + v.len()].copy_from_slice(v);
    }

    /// Decode a slot copied out of the ring (after validation).
    pub(crate) fn decode(slot: &[u8; EVENT_SLOT_BYTES]) -> Result<Event, &'static str> {
        let f = |i: usize| u64::from_ne_bytes(slot[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let (tw, vw) = (f(0), f(1));
        let (tc, tb, vc, vb) = (
            (tw & 0xffff_ffff) as u32,
            (tw >> 32) as usize,
            (vw & 0xffff_ffff) as u32,
            (vw >> 32) as usize,
        );
        if tb + vb > EVENT_PAYLOAD_MAX {
            return Err("type and value lengths exceed the slot");
        }
        let hb = std::mem::size_of::<EventSlotHeader>();
        let value = |code: u32, bytes: &[u8]| -> Result<EventValue, &'static str> {
            if code == CHAR_CODE {
                return String::from_utf8(bytes.to_vec())
                    .map(EventValue::Text)
                    .map_err(|_| "text is not UTF-8");
            }
            let dtype = DType::from_code(code).ok_or("unknown type code")?;
            if bytes.len() % dtype.itemsize() != 0 {
                return Err("array length is not a whole number of values");
            }
            Ok(EventValue::Array {
                dtype,
                bytes: bytes.to_vec(),
            })
        };
        Ok(Event {
            kind: value(tc, &slot[hb..hb + tb])?,
            value: value(vc, &slot[hb + tb..hb + tb + vb])?,
            sample: f(2),
            offset: f(3) as i64,
            duration: f(4),
            stamp_ns: f(5),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_a_slot() {
        let mut slot = [0u8; EVENT_SLOT_BYTES];
        for ev in [
            Event::new("trigger", EventValue::f64(3.5), 1234),
            Event {
                offset: -5,
                duration: 7,
                ..Event::new(EventValue::i64(9), "stim on", 1)
            },
            Event::new(
                "",
                EventValue::Array {
                    dtype: DType::I16,
                    bytes: vec![1, 0, 2, 0],
                },
                0,
            ),
        ] {
            ev.encode(99, &mut slot);
            let back = Event::decode(&slot).unwrap();
            assert_eq!(back, Event { stamp_ns: 99, ..ev });
        }
        assert_eq!(EventValue::f64(3.5).to_f64s(), Some(vec![3.5]));
    }

    #[test]
    fn damaged_slots_are_refused_with_the_reason() {
        let mut slot = [0u8; EVENT_SLOT_BYTES];
        Event::new("x", "y", 0).encode(0, &mut slot);
        slot[0] = 77; // unknown type code
        assert_eq!(Event::decode(&slot).unwrap_err(), "unknown type code");
        slot[0] = 0;
        slot[5] = 255; // type length beyond the slot
        assert!(Event::decode(&slot).unwrap_err().contains("exceed"));
    }
}
