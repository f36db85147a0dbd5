//! Values of every shape serde has, for the codec's property tests.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};

/// An enum with every kind of variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) enum Shape {
    Unit,
    Newtype(i32),
    Tuple(u8, i64),
    Struct { name: String, weight: f32 },
}

/// A struct with a field of every kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Everything {
    flag: bool,
    small: (u8, i8, u16, i16),
    words: (u32, i32, u64, i64),
    wide: (u128, i128),
    floats: (f64, f64),
    letter: char,
    text: String,
    #[serde(with = "serde_bytes")]
    bytes: Vec<u8>,
    maybe: Option<u64>,
    shapes: Vec<Shape>,
    map: BTreeMap<u16, String>,
    unit: (),
    size: (usize, isize),
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Unit),
        any::<i32>().prop_map(Shape::Newtype),
        (any::<u8>(), any::<i64>()).prop_map(|(a, b)| Shape::Tuple(a, b)),
        (".*", -1e6f32..1e6).prop_map(|(name, weight)| Shape::Struct { name, weight }),
    ]
}

/// Any [`Everything`].
pub(super) fn everything() -> impl Strategy<Value = Everything> {
    (
        (
            any::<bool>(),
            any::<(u8, i8, u16, i16)>(),
            any::<(u32, i32, u64, i64)>(),
        ),
        (
            any::<(u128, i128)>(),
            (-1e9f64..1e9, -1e9f64..1e9),
            any::<char>(),
            ".*",
        ),
        (
            proptest::collection::vec(any::<u8>(), 0..300),
            any::<Option<u64>>(),
            proptest::collection::vec(shape(), 0..8),
            proptest::collection::btree_map(any::<u16>(), ".*", 0..5),
            any::<(usize, isize)>(),
        ),
    )
        .prop_map(
            |(
                (flag, small, words),
                (wide, floats, letter, text),
                (bytes, maybe, shapes, map, size),
            )| {
                Everything {
                    flag,
                    small,
                    words,
                    wide,
                    floats,
                    letter,
                    text,
                    bytes,
                    maybe,
                    shapes,
                    map,
                    unit: (),
                    size,
                }
            },
        )
}
