//! The built-in embedder: signed feature hashing of a text's words, normalized. No model
//! and no network, the same vector for the same text on every machine and release, so the
//! demo and the tests run offline. Texts that share words are near; synonyms are not.

use crate::{EmbedError, Embedder};

#[derive(Debug, Clone, Copy, Default)]
pub struct Lexical;

#[async_trait::async_trait]
impl Embedder for Lexical {
    async fn embed(&self, texts: &[&str], dimension: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|text| embed_one(text, dimension))
            .collect())
    }

    fn describe(&self) -> String {
        "built-in: hashing of words, lexical (texts that share words are near), not semantic"
            .to_owned()
    }
}

/// FNV-1a: fixed, unlike std's seeded hasher, so vectors never change between runs.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The text's lowercase words, each added to one coordinate with a sign from its hash
/// (so collisions cancel rather than pile up), then scaled to unit length. A text
/// without words is the zero vector.
pub(crate) fn embed_one(text: &str, dimension: usize) -> Vec<f32> {
    let mut vector = vec![0f32; dimension];
    if dimension == 0 {
        return vector;
    }
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let hash = fnv1a(word.to_lowercase().as_bytes());
        let slot = (hash % dimension as u64) as usize;
        let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
        vector[slot] += sign;
    }
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
    vector
}
