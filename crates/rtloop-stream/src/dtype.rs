//! Sample types: the FieldTrip set, with FieldTrip's numeric codes so the server can use
//! them on the wire unchanged.

use std::fmt;
use std::str::FromStr;

/// The type of one channel value. Codes are FieldTrip's (`DATATYPE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DType {
    /// `uint8`
    U8 = 1,
    /// `uint16`
    U16 = 2,
    /// `uint32`
    U32 = 3,
    /// `uint64`
    U64 = 4,
    /// `int8`
    I8 = 5,
    /// `int16`
    I16 = 6,
    /// `int32`
    I32 = 7,
    /// `int64`
    I64 = 8,
    /// `float32`
    F32 = 9,
    /// `float64`
    F64 = 10,
}

/// Every sample dtype, in FieldTrip code order.
pub const ALL_DTYPES: [DType; 10] = [
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F32,
    DType::F64,
];

/// The names `DType::from_str` accepts, for error messages.
pub const DTYPE_NAMES: &str =
    "int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64";

impl DType {
    /// Bytes per value.
    #[must_use]
    pub const fn itemsize(self) -> usize {
        match self {
            DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// The numpy-style name (`"int16"`, `"float32"`, ...).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// The FieldTrip numeric code.
    #[must_use]
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// The dtype with this FieldTrip code, if it is a sample type (CHAR, code 0, is not).
    #[must_use]
    pub fn from_code(code: u32) -> Option<DType> {
        ALL_DTYPES.iter().copied().find(|d| d.code() == code)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dtype name that is not one of [`DTYPE_NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype {0:?}; allowed: {DTYPE_NAMES}")]
pub struct UnknownDType(pub String);

impl FromStr for DType {
    type Err = UnknownDType;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let canon = match s {
            "i1" => "int8",
            "i2" => "int16",
            "i4" => "int32",
            "i8" => "int64",
            "u1" => "uint8",
            "u2" => "uint16",
            "u4" => "uint32",
            "u8" => "uint64",
            "f4" | "float" | "single" => "float32",
            "f8" | "double" => "float64",
            other => other,
        };
        ALL_DTYPES
            .iter()
            .copied()
            .find(|d| d.name() == canon)
            .ok_or_else(|| UnknownDType(s.to_owned()))
    }
}

/// A Rust type that is a stream sample value. Sealed: exactly the FieldTrip set.
pub trait Sample: Copy + Default + Send + Sync + 'static + sealed::Sealed {
    /// The stream dtype this Rust type stands for.
    const DTYPE: DType;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! impl_sample {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Sample for $t { const DTYPE: DType = DType::$d; }
    )*};
}
impl_sample!(u8 => U8, u16 => U16, u32 => U32, u64 => U64, i8 => I8, i16 => I16,
    i32 => I32, i64 => I64, f32 => F32, f64 => F64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_through_its_name_and_code() {
        for d in ALL_DTYPES {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(DType::from_code(d.code()), Some(d));
        }
        assert_eq!(
            DType::from_code(0),
            None,
            "CHAR is an event type, not a sample type"
        );
    }

    #[test]
    fn unknown_dtype_name_lists_the_allowed_ones() {
        let e = "complex64".parse::<DType>().unwrap_err();
        assert!(e.to_string().contains("complex64"));
        assert!(e.to_string().contains("float64"));
    }
}
