//! The synthesizer's tests: documents valid against their schemas (checked by the `jsonschema`
//! crate), formats and patterns as a validating client reads them, key order.

use super::*;
use rand::SeedableRng;
use serde_json::json;

#[test]
fn the_same_seed_gives_the_same_document_and_required_keys_are_always_there() {
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"enum": ["c", "f"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}
    }, "required": ["city", "days"]});
    let a = synthesize(&schema, &mut SimRng::seed_from_u64(3), 2);
    let b = synthesize(&schema, &mut SimRng::seed_from_u64(3), 2);
    assert_eq!(a, b);
    for seed in 0..50 {
        let v = synthesize(&schema, &mut SimRng::seed_from_u64(seed), 2);
        assert!(v["city"].is_string() && v["days"].is_i64(), "{v}");
        let d = v["days"].as_i64().unwrap();
        assert!((1..=7).contains(&d), "{v}");
        assert!(v.get("unit").is_none_or(|u| u == "c" || u == "f"), "{v}");
    }
}

#[test]
fn recursive_references_end() {
    let schema = json!({"$defs": {"node": {"type": "object", "properties": {
        "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
    }, "required": ["name", "children"]}}, "$ref": "#/$defs/node"});
    for seed in 0..20 {
        let v = synthesize(&schema, &mut SimRng::seed_from_u64(seed), 1);
        assert!(v["name"].is_string(), "{v}");
    }
}

/// Patterns as programs write them: anchored or not, in llama.cpp's dialect or with escapes
/// it cannot read (`\d`, `\w`: its grammar then accepts any string, a model still writes one
/// that matches).
const PATTERNS: &[&str] = &[
    "^[A-Z]{2}-[0-9]{3}$",
    r"^\d{3}-\d{4}$",
    "^(red|green|blue)$",
    r"^[a-z0-9._]+@[a-z]+\.[a-z]{2,3}$",
    "[a-z]+",
    r"^\w+( \w+)*$",
    "^.{1,12}$",
    "^[^,]+$",
    r"^v\d+\.\d+(\.\d+)?$",
];

/// Formats a client may validate its own type against (pydantic: `datetime`, `UUID`,
/// `EmailStr`, `HttpUrl`, `IPv4Address`, `timedelta`, ...).
const FORMATS: &[&str] = &[
    "date",
    "date-time",
    "time",
    "uuid",
    "uuid4",
    "email",
    "uri",
    "uri-reference",
    "hostname",
    "ipv4",
    "ipv6",
    "duration",
    "json-pointer",
];

#[test]
fn each_format_is_written_as_its_format_says() {
    for f in FORMATS {
        let schema = json!({"type": "string", "format": f});
        let validator = jsonschema::options().should_validate_formats(true).build(&schema).unwrap();
        for seed in 0..20 {
            let v = synthesize(&schema, &mut SimRng::seed_from_u64(seed), 3);
            assert!(validator.is_valid(&v), "{f}: {v}");
        }
    }
    // pydantic's `Decimal`: a number, or a string under a lookahead this module cannot
    // draw from: the number.
    let decimal =
        json!({"anyOf": [{"type": "number"}, {"type": "string", "pattern": "^(?!^[-+.]*$)[+-]?0*\\d*\\.?\\d*$"}]});
    for seed in 0..20 {
        assert!(synthesize(&decimal, &mut SimRng::seed_from_u64(seed), 2).is_number());
    }
}

#[test]
fn strings_match_their_pattern_in_printable_ascii_and_required_keys_come_first() {
    for p in PATTERNS {
        let schema = json!({"type": "string", "pattern": p, "maxLength": 2});
        for seed in 0..30 {
            let v = synthesize(&schema, &mut SimRng::seed_from_u64(seed), 3);
            let text = v.as_str().unwrap();
            assert!(text.bytes().all(|b| (b' '..=b'~').contains(&b)), "{p}: {text:?}");
            let validator = jsonschema::validator_for(&json!({"type": "string", "pattern": p})).unwrap();
            assert!(validator.is_valid(&v), "{p}: {text:?}");
        }
    }
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}}, "required": ["c", "b"]});
    for seed in 0..20 {
        let v = synthesize(&schema, &mut SimRng::seed_from_u64(seed), 1);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(&keys[..2], ["b", "c"], "required first, in the properties' order: {v}");
    }
}

use proptest::prelude::*;

/// Schemas built from the keywords this module honours, nested.
fn schemas() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        (proptest::option::of(0u64..5), proptest::option::of(5u64..40)).prop_map(|(lo, hi)| {
            let mut s = json!({"type": "string"});
            if let Some(l) = lo {
                s["minLength"] = json!(l);
            }
            if let Some(h) = hi {
                s["maxLength"] = json!(h);
            }
            s
        }),
        (-50i64..50, 0i64..100, proptest::bool::ANY).prop_map(|(lo, span, excl)| {
            if excl {
                json!({"type": "integer", "exclusiveMinimum": lo, "exclusiveMaximum": lo + span + 2})
            } else {
                json!({"type": "integer", "minimum": lo, "maximum": lo + span})
            }
        }),
        (1i64..10).prop_map(|m| json!({"type": "integer", "multipleOf": m, "minimum": 3, "maximum": 200})),
        (-10.0f64..10.0, 0.5f64..50.0)
            .prop_map(|(lo, span)| json!({"type": "number", "minimum": lo, "maximum": lo + span})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": ["string", "null"]})),
        Just(json!({"enum": ["a", 1, null, {"k": true}]})),
        Just(json!({"const": "fixed"})),
        proptest::sample::select(FORMATS).prop_map(|f| json!({"type": "string", "format": f})),
        proptest::sample::select(PATTERNS).prop_map(|p| json!({"type": "string", "pattern": p})),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            (
                proptest::collection::vec(inner.clone(), 1..5),
                proptest::collection::vec(proptest::bool::ANY, 5),
                proptest::bool::ANY
            )
                .prop_map(|(props, req, closed)| {
                    let mut p = Map::new();
                    let mut r = Vec::new();
                    for (i, v) in props.into_iter().enumerate() {
                        p.insert(format!("p{i}"), v);
                        if req[i] {
                            r.push(json!(format!("p{i}")));
                        }
                    }
                    json!({"type": "object", "properties": p, "required": r, "additionalProperties": !closed})
                }),
            (inner.clone(), 0u64..3, 0u64..4).prop_map(|(items, min, extra)| {
                json!({"type": "array", "items": items, "minItems": min, "maxItems": min + extra})
            }),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({"anyOf": [a, b]})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({"type": "array", "prefixItems": [a, b]})),
            (inner.clone(), inner).prop_map(|(a, b)| json!({"allOf": [
                {"type": "object", "properties": {"x": a}, "required": ["x"]},
                {"type": "object", "properties": {"y": b}, "required": ["y"]}
            ]})),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Whatever the schema, the document is valid against it (checked by the jsonschema
    /// crate, not by this module's own reading of the schema).
    #[test]
    fn synthesized_documents_validate_against_their_schema(schema in schemas(), seed in any::<u64>(), words in 1usize..6) {
        let doc = synthesize(&schema, &mut SimRng::seed_from_u64(seed), words);
        let validator = jsonschema::validator_for(&schema).expect("the generated schema is valid");
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        prop_assert!(errors.is_empty(), "{doc} against {schema}: {errors:?}");
    }
}

#[test]
fn whatever_a_schema_allows_an_answer_stays_small() {
    // Bounds a real model never reaches in one answer: each synthesized quickly and small.
    for schema in [
        json!({"type": "array", "items": {"type": "integer"}, "maxItems": 1_000_000_000u64}),
        json!({"type": "array", "minItems": 1_000_000_000u64}),
        json!({"type": "string", "minLength": 1_000_000_000u64}),
        json!({"type": "string", "pattern": "^a{0,1000000000}$"}),
        json!({"type": "string", "pattern": "^(ab|c){3,}x+$"}),
        json!({"type": "string", "pattern": "[a-z]{100000000}"}),
    ] {
        let v = synthesize(&schema, &mut SimRng::seed_from_u64(1), 2);
        assert!(v.to_string().len() <= 20_000, "{schema}: {} bytes", v.to_string().len());
    }
    // A wide repetition still gives a match: a few past its minimum.
    let wide = synthesize(&json!({"pattern": "^a{2,1000000000}$"}), &mut SimRng::seed_from_u64(3), 1);
    assert!(wide.as_str().is_some_and(|t| (2..=6).contains(&t.len()) && t.bytes().all(|b| b == b'a')), "{wide}");
    let few = synthesize(&json!({"type": "array", "maxItems": 1_000_000}), &mut SimRng::seed_from_u64(2), 1);
    assert!(few.as_array().is_some_and(|a| (1..=5).contains(&a.len())), "{few}");
}
