//! Policy wildcards: `*` (any run of characters) and `?` (one character),
//! with policy variables `${aws:username}` filled in as literal text (so a
//! user name holding `*` matches only itself), and `${*}`, `${?}`, `${$}`
//! for the characters themselves.

/// One element of a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Element {
    Char(char),
    AnyRun,
    AnyOne,
    /// A variable not (yet) filled in: `${name}` with the name lower-cased.
    Variable(String),
    /// A variable the request has no value for: matches nothing.
    Never,
}

/// A wildcard pattern of a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    elements: Vec<Element>,
}

impl Pattern {
    /// Parses `text`: `*`, `?`, `${variable}`, the rest literal.
    pub fn new(text: &str) -> Self {
        let mut elements = Vec::new();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if let Some(after) = rest.strip_prefix("${") {
                if let Some(end) = after.find('}') {
                    let name = &after[..end];
                    match name {
                        "*" => elements.push(Element::Char('*')),
                        "?" => elements.push(Element::Char('?')),
                        "$" => elements.push(Element::Char('$')),
                        _ => elements.push(Element::Variable(name.to_ascii_lowercase())),
                    }
                    rest = &after[end + 1..];
                    continue;
                }
            }
            elements.push(match c {
                '*' => Element::AnyRun,
                '?' => Element::AnyOne,
                c => Element::Char(c),
            });
            rest = &rest[c.len_utf8()..];
        }
        Self { elements }
    }

    /// `text` matched literally (no wildcards, no variables).
    pub fn literal(text: &str) -> Self {
        Self {
            elements: text.chars().map(Element::Char).collect(),
        }
    }

    /// The pattern followed by `*`.
    pub fn then_any(mut self) -> Self {
        self.elements.push(Element::AnyRun);
        self
    }

    /// Whether the pattern has a variable to fill in.
    pub fn has_variables(&self) -> bool {
        self.elements
            .iter()
            .any(|e| matches!(e, Element::Variable(_)))
    }

    /// The pattern with each variable replaced by `lookup`'s value as
    /// literal text (a variable without a value matches nothing).
    pub fn with_variables(&self, lookup: &impl Fn(&str) -> Option<String>) -> Pattern {
        if !self.has_variables() {
            return self.clone();
        }
        let mut elements = Vec::with_capacity(self.elements.len());
        for element in &self.elements {
            match element {
                Element::Variable(name) => match lookup(name) {
                    Some(value) => elements.extend(value.chars().map(Element::Char)),
                    None => elements.push(Element::Never),
                },
                other => elements.push(other.clone()),
            }
        }
        Pattern { elements }
    }

    /// Whether `text` matches, case-sensitively (callers lower-case both
    /// sides where the comparison ignores case).
    pub fn matches(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        let pattern = &self.elements;
        // Greedy match with backtracking to the last `*`: linear in practice,
        // O(pattern x text) at worst.
        let (mut p, mut t) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match pattern.get(p) {
                Some(Element::AnyRun) => {
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                Some(Element::AnyOne) => {
                    p += 1;
                    t += 1;
                    continue;
                }
                Some(Element::Char(c)) if *c == text[t] => {
                    p += 1;
                    t += 1;
                    continue;
                }
                Some(Element::Variable(name)) if literal_variable_matches(name, &text[t..]) => {
                    t += name.chars().count() + 3;
                    p += 1;
                    continue;
                }
                _ => {}
            }
            match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            }
        }
        pattern[p..].iter().all(|e| *e == Element::AnyRun)
    }
}

/// An unfilled `${name}` matches its own text.
fn literal_variable_matches(name: &str, text: &[char]) -> bool {
    let literal: Vec<char> = format!("${{{name}}}").chars().collect();
    text.starts_with(&literal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        let cases = [
            ("*", "", true),
            ("*", "anything", true),
            ("a*c", "abbbc", true),
            ("a*c", "abbbd", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("arn:aws:s3:::b/*", "arn:aws:s3:::b/k/x", true),
            ("arn:aws:s3:::b/*", "arn:aws:s3:::bb/k", false),
            ("arn:aws:s3:::b", "arn:aws:s3:::b/k", false),
            ("*a*a*a*a*b", &"a".repeat(200), false),
            ("s3:get*", "s3:getobject", true),
            ("s3:get*", "s3:putobject", false),
            ("é?", "éü", true),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(
                Pattern::new(pattern).matches(text),
                expected,
                "{pattern} ~ {text}"
            );
        }
    }

    #[test]
    fn variables_are_literal_text() {
        let lookup = |name: &str| (name == "aws:username").then(|| "a*b".to_string());
        let pattern = Pattern::new("arn:aws:s3:::b/home/${aws:username}/*");
        assert!(pattern.has_variables());
        let filled = pattern.with_variables(&lookup);
        assert!(filled.matches("arn:aws:s3:::b/home/a*b/x"));
        // The user's `*` is not a wildcard.
        assert!(!filled.matches("arn:aws:s3:::b/home/axxb/x"));
        let missing = Pattern::new("${aws:userid}/*").with_variables(&lookup);
        assert!(!missing.matches("anything/x"));
        assert!(Pattern::new("a${*}b${?}${$}").matches("a*b?$"));
        assert!(!Pattern::new("a${*}b").matches("axxb"));
        // Unfilled, a variable matches its own text, and only that.
        assert!(Pattern::new("${aws:username}").matches("${aws:username}"));
        assert!(Pattern::new("${a}x").matches("${a}x"));
        assert!(!Pattern::new("${a}x").matches("${a}"));
        assert!(!Pattern::new("${aws:username}").matches("bob"));
        assert!(!Pattern::new("${a}").matches("${b}"));
    }
}
