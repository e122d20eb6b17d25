//! The document every page is: the head (styles, script, the CSRF token
//! for the script) around a body; pages without a session use it alone.

use maud::{html, Markup, DOCTYPE};

/// A page without a session (sign-in, errors).
pub(crate) fn bare(title: &str, body: Markup) -> Markup {
    document(title, None, html! { main { (body) } })
}

pub(crate) fn document(title: &str, csrf_token: Option<&str>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(token) = csrf_token {
                    meta name="csrf-token" content=(token);
                }
                title { (title) " · Tessera" }
                link rel="stylesheet" href="/static/console.css";
                script src="/static/console.js" defer {}
            }
            body { (body) }
        }
    }
}

/// A byte count as people read it (1.5 MiB).
pub(crate) fn size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1024), "1.0 KiB");
        assert_eq!(size(1536 * 1024), "1.5 MiB");
        assert_eq!(size(5 << 40), "5.0 TiB");
    }

    #[test]
    fn text_is_escaped() {
        let page = bare("<t>", html! { p { ("<script>") } }).into_string();
        assert!(page.contains("&lt;script&gt;"));
        assert!(!page.contains("<script>alert"));
        assert!(page.contains("&lt;t&gt; · Tessera"));
    }
}
