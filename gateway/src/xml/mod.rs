//! S3 XML: a small response writer on `quick_xml::Writer`, the response
//! documents, and the strict reader for request bodies.

pub mod access_documents;
pub mod documents;
pub mod encryption_documents;
pub mod lifecycle_documents;
pub mod lock_documents;
pub mod object_documents;
pub mod parse;

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

/// A request body that is not the XML expected: S3 answers MalformedXML.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the XML body is not well-formed or not what was expected")]
pub struct MalformedXml;

/// The namespace of every S3 response document except `Error`.
pub const S3_NAMESPACE: &str = "http://s3.amazonaws.com/doc/2006-03-01/";

/// Builds one XML document into memory: declaration, then elements in order.
/// Text and attribute values are escaped by quick-xml.
pub struct XmlWriter {
    inner: Writer<Vec<u8>>,
}

impl Default for XmlWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl XmlWriter {
    /// A document starting with `<?xml version="1.0" encoding="UTF-8"?>`.
    pub fn new() -> Self {
        let mut writer = Self {
            inner: Writer::new(Vec::with_capacity(512)),
        };
        writer.emit(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
        writer
    }

    fn emit(&mut self, event: Event<'_>) {
        // Writing into a Vec<u8> has no I/O that could fail.
        self.inner
            .write_event(event)
            .expect("writing XML into memory cannot fail");
    }

    /// Opens `<name>`.
    pub fn open(&mut self, name: &str) {
        self.emit(Event::Start(BytesStart::new(name)));
    }

    /// Opens the root `<name xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`.
    pub fn open_root(&mut self, name: &str) {
        let start = BytesStart::new(name).with_attributes([("xmlns", S3_NAMESPACE)]);
        self.emit(Event::Start(start));
    }

    /// Opens `<name attr="value" ...>` (e.g. an ACL Grantee with its xsi:type).
    pub fn open_with_attributes(&mut self, name: &str, attributes: &[(&str, &str)]) {
        let start = BytesStart::new(name).with_attributes(attributes.iter().copied());
        self.emit(Event::Start(start));
    }

    /// Closes `</name>`.
    pub fn close(&mut self, name: &str) {
        self.emit(Event::End(BytesEnd::new(name)));
    }

    /// Text inside the element opened last.
    pub fn text(&mut self, text: &str) {
        self.emit(Event::Text(BytesText::new(text)));
    }

    /// `<name>text</name>`, or `<name/>` when `text` is empty.
    pub fn element(&mut self, name: &str, text: &str) {
        if text.is_empty() {
            self.emit(Event::Empty(BytesStart::new(name)));
        } else {
            self.open(name);
            self.emit(Event::Text(BytesText::new(text)));
            self.close(name);
        }
    }

    /// `<name>text</name>` when `text` is Some, nothing otherwise.
    pub fn optional(&mut self, name: &str, text: Option<&str>) {
        if let Some(text) = text {
            self.element(name, text);
        }
    }

    /// `<name>n</name>` for a number.
    pub fn number(&mut self, name: &str, n: u64) {
        self.element(name, &n.to_string());
    }

    /// `<name>true|false</name>`.
    pub fn boolean(&mut self, name: &str, b: bool) {
        self.element(name, if b { "true" } else { "false" });
    }

    /// The finished document.
    pub fn finish(self) -> Vec<u8> {
        self.inner.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_text_and_writes_empty_elements() {
        let mut w = XmlWriter::new();
        w.open_root("R");
        w.element("Key", "a<b&\"c\"");
        w.element("Prefix", "");
        w.boolean("IsTruncated", false);
        w.close("R");
        let out = String::from_utf8(w.finish()).unwrap();
        assert_eq!(
            out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
             <R xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\
             <Key>a&lt;b&amp;&quot;c&quot;</Key><Prefix/><IsTruncated>false</IsTruncated></R>"
        );
    }
}
