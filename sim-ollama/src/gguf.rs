//! What a model file says about itself in `/api/show`: `model_info` (its GGUF metadata),
//! `tensors`, and the Modelfile's `PARAMETER` lines.
//!
//! The real handler (`GetModelInfo`, server/routes.go v0.33.0-rc2 1396-1598) reads these from
//! the GGUF: `model_info` is every metadata key but `general.name` and
//! `tokenizer.chat_template`, in key order (a Go map); without `verbose` the arrays (the
//! vocabulary, its types, the merges) are not loaded and show as `null` (`getModelData` with
//! `maxArraySize` 0, 1600-1621); `tensors` is always there (`omitempty`, but never empty for a
//! GGUF). The simulator has no file, so a catalogue entry may give its metadata
//! ([`ModelSpec::model_info`]) and what it does not give is derived from the entry, with the keys
//! a llama-architecture GGUF has. The tensors follow from the metadata (layers, widths,
//! vocabulary), in the order of the `tiny` model the captures came from.

use crate::config::ModelSpec;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One tensor of `/api/show` (`api.Tensor`, api/types.go 957-961).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Tensor {
    pub(crate) name: String,
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) shape: Vec<u64>,
}

/// `general.file_type` of a quantization level (`FileType`, fs/ggml/type.go 13-50).
fn file_type(quantization: &str) -> u64 {
    match quantization.to_ascii_uppercase().as_str() {
        "F16" => 1,
        "Q4_0" => 2,
        "Q4_1" => 3,
        "Q8_0" => 7,
        "Q5_0" => 8,
        "Q5_1" => 9,
        "Q2_K" => 10,
        "Q3_K_S" => 11,
        "Q3_K_M" => 12,
        "Q3_K_L" => 13,
        "Q4_K_S" => 14,
        "Q4_K_M" => 15,
        "Q5_K_S" => 16,
        "Q5_K_M" => 17,
        "Q6_K" => 18,
        "BF16" => 32,
        _ => 0,
    }
}

/// The tensor type of a quantization level's weight matrices (`Q4_K_M` files hold `Q4_K`).
fn weight_type(quantization: &str) -> String {
    let q = quantization.to_ascii_uppercase();
    match file_type(&q) {
        0 => "F32".into(),
        _ => match q.strip_suffix("_S").or(q.strip_suffix("_M")).or(q.strip_suffix("_L")) {
            Some(base) if base.ends_with("_K") => base.to_string(),
            _ => q,
        },
    }
}

/// `4.3B` -> 4300000000.
pub(crate) fn parameter_count(size: &str) -> u64 {
    let (num, mult) = match size.chars().last() {
        Some('B') => (&size[..size.len() - 1], 1e9),
        Some('M') => (&size[..size.len() - 1], 1e6),
        Some('K') => (&size[..size.len() - 1], 1e3),
        _ => (size, 1.0),
    };
    (num.parse::<f64>().unwrap_or(0.0) * mult) as u64
}

/// The metadata with every key: the entry's own, then what is derived for the keys it does not
/// give. The arrays (vocabulary, token types, merges: tens of thousands of values) are built
/// only `with_arrays`; without, they are `null`, as the real loader leaves them unread.
fn metadata(spec: &ModelSpec, with_arrays: bool) -> BTreeMap<String, Value> {
    let arch = spec.family.replace('-', "_");
    let given = |k: &str| spec.model_info.get(k).and_then(Value::as_u64);
    let e = spec.embedding_length.max(1);
    let head_dim = given(&format!("{arch}.rope.dimension_count")).unwrap_or(if e >= 2048 { 128 } else { 64 }.min(e));
    let heads = given(&format!("{arch}.attention.head_count")).unwrap_or((e / head_dim).max(1));
    let kv_heads = given(&format!("{arch}.attention.head_count_kv")).unwrap_or((heads / 4).max(1));
    // The KV cache per token is 2 (K and V) x layers x KV heads x head size x 2 bytes.
    let layers = given(&format!("{arch}.block_count"))
        .unwrap_or((spec.kv_bytes_per_token() / (4 * kv_heads * head_dim).max(1)).max(1));
    let vocab = given(&format!("{arch}.vocab_size")).unwrap_or(32_000);
    let mut m: BTreeMap<String, Value> = BTreeMap::new();
    let mut put = |k: String, v: Value| {
        m.insert(k, v);
    };
    put("general.architecture".into(), Value::from(arch.clone()));
    put("general.file_type".into(), Value::from(file_type(&spec.quantization_level)));
    put("general.parameter_count".into(), Value::from(parameter_count(&spec.parameter_size)));
    put("general.quantization_version".into(), Value::from(2));
    put(format!("{arch}.attention.head_count"), Value::from(heads));
    put(format!("{arch}.attention.head_count_kv"), Value::from(kv_heads));
    put(format!("{arch}.attention.layer_norm_rms_epsilon"), Value::from(1e-5));
    put(format!("{arch}.block_count"), Value::from(layers));
    put(format!("{arch}.context_length"), Value::from(spec.context_length));
    put(format!("{arch}.embedding_length"), Value::from(e));
    put(format!("{arch}.feed_forward_length"), Value::from(4 * e));
    put(format!("{arch}.rope.dimension_count"), Value::from(head_dim));
    put(format!("{arch}.rope.freq_base"), Value::from(10_000.0));
    put(format!("{arch}.vocab_size"), Value::from(vocab));
    put("tokenizer.ggml.add_bos_token".into(), Value::Bool(true));
    put("tokenizer.ggml.bos_token_id".into(), Value::from(vocab.saturating_sub(5)));
    put("tokenizer.ggml.eos_token_id".into(), Value::from(vocab.saturating_sub(1)));
    let array = |f: &dyn Fn(u64) -> Value, n: u64| {
        if with_arrays { Value::Array((0..n).map(f).collect()) } else { Value::Null }
    };
    put("tokenizer.ggml.merges".into(), array(&|i| Value::from(format!("m{i} x")), vocab / 8));
    put("tokenizer.ggml.model".into(), Value::from("gpt2"));
    put("tokenizer.ggml.pre".into(), Value::from("default"));
    put("tokenizer.ggml.token_type".into(), array(&|_| Value::from(1), vocab));
    put("tokenizer.ggml.tokens".into(), array(&|i| Value::from(format!("t{i}")), vocab));
    // The entry's own metadata replaces what was derived, key by key (a given array whole,
    // or `null` without arrays).
    for (k, v) in &spec.model_info {
        let v = if v.is_array() && !with_arrays { Value::Null } else { v.clone() };
        m.insert(k.clone(), v);
    }
    m.remove("general.name");
    m.remove("tokenizer.chat_template");
    m
}

/// `model_info`: keys in order; arrays `null` unless `verbose`.
pub(crate) fn model_info(spec: &ModelSpec, verbose: bool) -> Map<String, Value> {
    metadata(spec, verbose).into_iter().collect()
}

/// `tensors`: the weights a llama-architecture file of this metadata (`info`, as
/// [`model_info`] gave it) holds.
pub(crate) fn tensors(spec: &ModelSpec, info: &Map<String, Value>) -> Vec<Tensor> {
    let meta = info;
    let arch = spec.family.replace('-', "_");
    let get = |k: &str| meta.get(&format!("{arch}.{k}")).and_then(Value::as_u64).unwrap_or(1);
    let (e, ffn, vocab, layers) =
        (get("embedding_length"), get("feed_forward_length"), get("vocab_size"), get("block_count"));
    let kv = get("attention.head_count_kv") * get("rope.dimension_count");
    let weight = weight_type(&spec.quantization_level);
    let t = |name: String, kind: &str, shape: &[u64]| Tensor { name, kind: kind.to_string(), shape: shape.to_vec() };
    let mut out = vec![
        t("output.weight".into(), &weight, &[e, vocab]),
        t("output_norm.weight".into(), "F32", &[e]),
        t("token_embd.weight".into(), &weight, &[e, vocab]),
    ];
    for b in 0..layers {
        let n = |s: &str| format!("blk.{b}.{s}.weight");
        out.extend([
            t(n("attn_k"), &weight, &[e, kv]),
            t(n("attn_norm"), "F32", &[e]),
            t(n("attn_output"), &weight, &[e, e]),
            t(n("attn_q"), &weight, &[e, e]),
            t(n("attn_v"), &weight, &[e, kv]),
            t(n("ffn_down"), &weight, &[ffn, e]),
            t(n("ffn_gate"), &weight, &[e, ffn]),
            t(n("ffn_norm"), "F32", &[e]),
            t(n("ffn_up"), &weight, &[e, ffn]),
        ]);
    }
    out
}

/// `parameters`: one line per Modelfile parameter value, the name padded to 30 columns and the
/// value as Go's `%#v` prints it (a string quoted, a number bare), server/routes.go 1497-1509.
pub(crate) fn parameters(spec: &ModelSpec) -> String {
    spec.parameters.iter().map(|(k, v)| format!("{k:<30} {}", go_value(v))).collect::<Vec<_>>().join("\n")
}

/// The Modelfile's `PARAMETER` lines (`Model.String`, types/model's Modelfile printer).
pub(crate) fn modelfile_parameters(spec: &ModelSpec) -> String {
    spec.parameters.iter().map(|(k, v)| format!("PARAMETER {k} {v}\n")).collect()
}

fn go_value(v: &str) -> String {
    if v.parse::<f64>().is_ok() || v == "true" || v == "false" {
        v.to_string()
    } else {
        serde_json::to_string(v).expect("a string encodes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::default_catalogue;

    fn tiny() -> ModelSpec {
        default_catalogue().into_iter().find(|m| m.name == "tiny:latest").expect("tiny in the catalogue")
    }

    #[test]
    fn tinys_tensors_are_the_captured_files() {
        // reference/real-ollama/06-post-show.txt: 21 tensors, all F32, in this order.
        let t = tensors(&tiny(), &model_info(&tiny(), false));
        assert_eq!(t.len(), 21);
        let first: Vec<(&str, &[u64])> = t.iter().take(6).map(|t| (t.name.as_str(), t.shape.as_slice())).collect();
        assert_eq!(
            first,
            [
                ("output.weight", &[64u64, 328][..]),
                ("output_norm.weight", &[64][..]),
                ("token_embd.weight", &[64, 328][..]),
                ("blk.0.attn_k.weight", &[64, 64][..]),
                ("blk.0.attn_norm.weight", &[64][..]),
                ("blk.0.attn_output.weight", &[64, 64][..]),
            ]
        );
        assert_eq!((t[11].name.as_str(), t[11].shape.as_slice()), ("blk.0.ffn_up.weight", &[64u64, 128][..]));
        assert!(t.iter().all(|t| t.kind == "F32"));
    }

    #[test]
    fn tinys_model_info_is_the_captured_one() {
        let info = model_info(&tiny(), false);
        let keys: Vec<&str> = info.keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 23, "{keys:?}");
        assert_eq!(info["llama.vocab_size"], 328);
        assert_eq!(info["tokenizer.ggml.tokens"], Value::Null);
        let verbose = model_info(&tiny(), true);
        assert_eq!(verbose["tokenizer.ggml.tokens"].as_array().map(Vec::len), Some(328));
        assert_eq!(
            parameters(&tiny()),
            "stop                           \"<|eot_id|>\"\nstop                           \"<|start_header_id|>\""
        );
    }

    #[test]
    fn quantized_files_hold_quantized_weights_and_f32_norms() {
        let q = default_catalogue().into_iter().find(|m| m.quantization_level == "Q4_K_M").expect("a Q4_K_M model");
        let t = tensors(&q, &model_info(&q, false));
        assert_eq!(t[0].kind, "Q4_K");
        assert_eq!(t[1].kind, "F32");
        assert_eq!(model_info(&q, false)["general.file_type"], 15);
    }
}
