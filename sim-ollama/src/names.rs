//! Model names as Ollama reads them: `[host/][namespace/]model[:tag]`, tag `latest` by
//! default, matched case-insensitively.

/// The registry host of unqualified names.
pub(crate) const DEFAULT_HOST: &str = "registry.ollama.ai";
/// The namespace of unqualified names.
pub(crate) const DEFAULT_NAMESPACE: &str = "library";

/// A parsed, valid model name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Name {
    pub(crate) host: String,
    pub(crate) namespace: String,
    pub(crate) model: String,
    pub(crate) tag: String,
}

fn valid_part(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Name {
    /// Parses a name; `None` when it is not a valid model name.
    pub(crate) fn parse(s: &str) -> Option<Name> {
        if s.is_empty() || s.contains(char::is_whitespace) {
            return None;
        }
        let (path, tag) = match s.rfind(':') {
            Some(i) if !s[i..].contains('/') => (&s[..i], &s[i + 1..]),
            _ => (s, "latest"),
        };
        let parts: Vec<&str> = path.split('/').collect();
        let (host, namespace, model) = match parts.as_slice() {
            [m] => (DEFAULT_HOST, DEFAULT_NAMESPACE, *m),
            [ns, m] => (DEFAULT_HOST, *ns, *m),
            [h, ns, m] => (*h, *ns, *m),
            _ => return None,
        };
        let host_ok =
            !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
        if !host_ok || !valid_part(namespace, 80) || !valid_part(model, 80) || !valid_part(tag, 80) {
            return None;
        }
        Some(Name { host: host.into(), namespace: namespace.into(), model: model.into(), tag: tag.into() })
    }

    /// The short display form `/api/tags` uses: `model:tag` for library models.
    pub(crate) fn display(&self) -> String {
        if self.host == DEFAULT_HOST && self.namespace == DEFAULT_NAMESPACE {
            format!("{}:{}", self.model, self.tag)
        } else if self.host == DEFAULT_HOST {
            format!("{}/{}:{}", self.namespace, self.model, self.tag)
        } else {
            format!("{}/{}/{}:{}", self.host, self.namespace, self.model, self.tag)
        }
    }

    /// The fully qualified form some errors print: `registry.ollama.ai/library/tiny:latest`.
    pub(crate) fn full(&self) -> String {
        format!("{}/{}/{}:{}", self.host, self.namespace, self.model, self.tag)
    }

    /// The key names are compared by: case-insensitive full form.
    pub(crate) fn key(&self) -> String {
        self.full().to_ascii_lowercase()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalise_like_ollama() {
        let n = Name::parse("gemma3").unwrap();
        assert_eq!(n.display(), "gemma3:latest");
        assert_eq!(n.full(), "registry.ollama.ai/library/gemma3:latest");
        assert_eq!(Name::parse("GEMMA3:Latest").unwrap().key(), n.key());
        assert_eq!(Name::parse("library/gemma3:latest").unwrap().key(), n.key());
        assert_eq!(Name::parse("registry.ollama.ai/library/gemma3").unwrap().key(), n.key());
        assert_eq!(Name::parse("llama3.2:1b").unwrap().tag, "1b");
        assert_eq!(Name::parse("localhost:5000/me/m:v1").unwrap().host, "localhost:5000");
    }

    #[test]
    fn invalid_names_are_rejected() {
        for s in ["", "a b", "a:", ":tag", "a/b/c/d", "-x", "x:t@g"] {
            assert!(Name::parse(s).is_none(), "{s:?} should be invalid");
        }
    }
}
