//! Strict reading of S3 request bodies: the document must be well-formed UTF-8
//! XML with one root, no DOCTYPE, bounded depth, and exactly the elements the
//! operation's schema allows; anything else is MalformedXML.

use super::MalformedXml;
use meta_api::{CompletedPart, StoredChecksum};
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

/// Largest CompleteMultipartUpload body accepted (10,000 parts with checksums fit easily).
pub const COMPLETE_UPLOAD_BODY_LIMIT: u64 = 4 * 1024 * 1024;
/// Largest DeleteObjects body accepted (1,000 keys of up to 1,024 bytes, escaped).
pub const DELETE_OBJECTS_BODY_LIMIT: u64 = 8 * 1024 * 1024;
/// Most keys one DeleteObjects request may name.
pub const MAX_DELETE_KEYS: usize = 1000;
/// Largest CreateBucketConfiguration body accepted.
pub const CREATE_BUCKET_BODY_LIMIT: u64 = 64 * 1024;
/// Deepest element nesting accepted; S3's request documents need 3.
const MAX_DEPTH: usize = 16;
/// Most elements in one document unless its schema allows fewer: a
/// CompleteMultipartUpload of 10,000 parts, each with its number, ETag and
/// five checksums, fits. Counted while parsing, so a body of tiny elements
/// is refused before it costs memory.
const MAX_ELEMENTS: usize = 100_000;
/// Most elements of a DeleteObjects body: the root, Quiet, and per key the
/// Object with its Key and the four fields S3 allows beside it.
const MAX_DELETE_ELEMENTS: usize = 2 + (2 + DELETE_OBJECT_FIELDS.len()) * MAX_DELETE_KEYS;

/// One parsed element: local name (namespace prefix dropped), its own text, children.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Element {
    /// Local name, namespace prefix dropped.
    pub name: String,
    /// The element's own text.
    pub text: String,
    /// Child elements, in order.
    pub children: Vec<Element>,
}

impl Element {
    /// The only child called `name`: MalformedXML when absent or repeated.
    fn single(&self, name: &str) -> Result<&Element, MalformedXml> {
        let mut found = self.children.iter().filter(|c| c.name == name);
        match (found.next(), found.next()) {
            (Some(one), None) => Ok(one),
            _ => Err(malformed()),
        }
    }

    /// Trimmed text of a leaf element: MalformedXML when it has children.
    fn leaf_text(&self) -> Result<&str, MalformedXml> {
        if self.children.is_empty() {
            Ok(self.text.trim())
        } else {
            Err(malformed())
        }
    }

    fn has_text(&self) -> bool {
        !self.text.trim().is_empty()
    }
}

fn malformed() -> MalformedXml {
    MalformedXml
}

fn start_element(e: &BytesStart<'_>) -> Result<Element, MalformedXml> {
    for attribute in e.attributes() {
        attribute.map_err(|_| malformed())?;
    }
    let name = std::str::from_utf8(e.local_name().into_inner()).map_err(|_| malformed())?;
    Ok(Element {
        name: name.to_string(),
        ..Element::default()
    })
}

/// The children of `element`, each a leaf with its text, by name; MalformedXML
/// when a child has children, repeats, or is not in `allowed`.
pub fn leaves<'a>(
    element: &'a Element,
    allowed: &[&str],
) -> Result<Vec<(&'a str, &'a str)>, MalformedXml> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for child in &element.children {
        let name = child.name.as_str();
        if !child.children.is_empty()
            || !allowed.contains(&name)
            || out.iter().any(|(n, _)| *n == name)
        {
            return Err(MalformedXml);
        }
        out.push((name, child.text.trim()));
    }
    Ok(out)
}

/// The text of leaf `name` among `leaves`.
pub fn leaf<'a>(leaves: &[(&str, &'a str)], name: &str) -> Option<&'a str> {
    leaves
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// Parses a whole document into its root element.
pub fn parse_document(bytes: &[u8]) -> Result<Element, MalformedXml> {
    parse_document_within(bytes, MAX_ELEMENTS)
}

/// [`parse_document`] of a document of at most `max_elements` elements.
fn parse_document_within(bytes: &[u8], max_elements: usize) -> Result<Element, MalformedXml> {
    let text = std::str::from_utf8(bytes).map_err(|_| malformed())?;
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut elements = 0usize;
    loop {
        let event = reader.read_event().map_err(|_| malformed())?;
        if matches!(event, Event::Start(_) | Event::Empty(_)) {
            elements += 1;
            if elements > max_elements {
                return Err(malformed());
            }
        }
        match event {
            Event::Decl(_) | Event::Comment(_) => {}
            Event::DocType(_) | Event::PI(_) => return Err(malformed()),
            Event::Start(e) => {
                if root.is_some() || stack.len() >= MAX_DEPTH {
                    return Err(malformed());
                }
                stack.push(start_element(&e)?);
            }
            Event::Empty(e) => {
                if root.is_some() {
                    return Err(malformed());
                }
                let element = start_element(&e)?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(element),
                    None => root = Some(element),
                }
            }
            Event::End(_) => {
                let element = stack.pop().ok_or_else(malformed)?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(element),
                    None => root = Some(element),
                }
            }
            Event::Text(t) => {
                let value = t.unescape().map_err(|_| malformed())?;
                match stack.last_mut() {
                    Some(current) => current.text.push_str(&value),
                    None if value.trim().is_empty() => {}
                    None => return Err(malformed()),
                }
            }
            Event::CData(c) => {
                let value = std::str::from_utf8(&c).map_err(|_| malformed())?;
                stack.last_mut().ok_or_else(malformed)?.text.push_str(value);
            }
            Event::Eof => break,
        }
    }
    match root {
        Some(root) if stack.is_empty() => Ok(root),
        _ => Err(malformed()),
    }
}

/// Checksum elements a client may send per part; meta checks each against
/// the checksum the part was uploaded with.
const PART_CHECKSUMS: [&str; 5] = [
    "ChecksumCRC32",
    "ChecksumCRC32C",
    "ChecksumCRC64NVME",
    "ChecksumSHA1",
    "ChecksumSHA256",
];

/// The parts of a CompleteMultipartUpload body, in the order sent (meta checks
/// the order and the ETags). At least one part is required, as in S3.
pub fn parse_complete_upload(bytes: &[u8]) -> Result<Vec<CompletedPart>, MalformedXml> {
    let root = parse_document(bytes)?;
    if root.name != "CompleteMultipartUpload" || root.has_text() || root.children.is_empty() {
        return Err(malformed());
    }
    root.children
        .iter()
        .map(|part| {
            if part.name != "Part" || part.has_text() {
                return Err(malformed());
            }
            for child in &part.children {
                let known = child.name == "PartNumber"
                    || child.name == "ETag"
                    || PART_CHECKSUMS.contains(&child.name.as_str());
                if !known {
                    return Err(malformed());
                }
            }
            let number = part
                .single("PartNumber")?
                .leaf_text()?
                .parse::<u32>()
                .map_err(|_| malformed())?;
            let etag = part.single("ETag")?.leaf_text()?.to_string();
            if etag.is_empty() {
                return Err(malformed());
            }
            let checksums = part
                .children
                .iter()
                .filter_map(|child| {
                    let algorithm = child.name.strip_prefix("Checksum")?;
                    PART_CHECKSUMS
                        .contains(&child.name.as_str())
                        .then_some((algorithm, child))
                })
                .map(|(algorithm, child)| {
                    Ok(StoredChecksum {
                        algorithm: algorithm.to_string(),
                        value: child.leaf_text()?.to_string(),
                    })
                })
                .collect::<Result<_, MalformedXml>>()?;
            Ok(CompletedPart {
                number,
                etag,
                checksums,
            })
        })
        .collect()
}

/// A DeleteObjects request: the objects, in order, and whether only errors
/// are reported.
#[derive(Debug, PartialEq, Eq)]
pub struct DeleteRequest {
    /// Objects to delete, in order.
    pub objects: Vec<DeleteTarget>,
    /// Whether only errors are reported.
    pub quiet: bool,
}

/// One `<Object>` of a DeleteObjects request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteTarget {
    /// The key, exactly as sent.
    pub key: String,
    /// The version to delete, as sent (checked per object).
    pub version_id: Option<String>,
}

/// Elements of `<Object>` besides `Key` and `VersionId` that S3 defines;
/// accepted and not used.
const DELETE_OBJECT_FIELDS: [&str; 4] = ["VersionId", "ETag", "LastModifiedTime", "Size"];

/// The body of DeleteObjects: 1 to 1,000 objects, each with one Key (kept
/// exactly, whitespace included), and an optional Quiet.
pub fn parse_delete_objects(bytes: &[u8]) -> Result<DeleteRequest, MalformedXml> {
    let root = parse_document_within(bytes, MAX_DELETE_ELEMENTS)?;
    if root.name != "Delete" || root.has_text() {
        return Err(malformed());
    }
    let mut keys = Vec::new();
    let mut quiet = None;
    for child in &root.children {
        match child.name.as_str() {
            "Object" => {
                if child.has_text() {
                    return Err(malformed());
                }
                for field in &child.children {
                    let known =
                        field.name == "Key" || DELETE_OBJECT_FIELDS.contains(&field.name.as_str());
                    if !known {
                        return Err(malformed());
                    }
                }
                let key = child.single("Key")?;
                if !key.children.is_empty() || key.text.is_empty() {
                    return Err(malformed());
                }
                let version_id = match child.children.iter().any(|c| c.name == "VersionId") {
                    true => Some(child.single("VersionId")?.leaf_text()?.to_string()),
                    false => None,
                };
                keys.push(DeleteTarget {
                    key: key.text.clone(),
                    version_id,
                });
            }
            "Quiet" if quiet.is_none() => {
                quiet = Some(match child.leaf_text()? {
                    "true" => true,
                    "false" => false,
                    _ => return Err(malformed()),
                });
            }
            _ => return Err(malformed()),
        }
    }
    if keys.is_empty() || keys.len() > MAX_DELETE_KEYS {
        return Err(malformed());
    }
    Ok(DeleteRequest {
        objects: keys,
        quiet: quiet.unwrap_or(false),
    })
}

/// The LocationConstraint of a CreateBucketConfiguration body, if it names one.
/// An empty body means no configuration.
pub fn parse_create_bucket(bytes: &[u8]) -> Result<Option<String>, MalformedXml> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let root = parse_document(bytes)?;
    if root.name != "CreateBucketConfiguration" || root.has_text() {
        return Err(malformed());
    }
    let mut constraint = None;
    for child in &root.children {
        match child.name.as_str() {
            "LocationConstraint" => {
                if constraint.is_some() {
                    return Err(malformed());
                }
                let value = child.leaf_text()?;
                constraint = (!value.is_empty()).then(|| value.to_string());
            }
            // Directory-bucket fields: accepted and ignored.
            "Location" | "Bucket" => {}
            _ => return Err(malformed()),
        }
    }
    Ok(constraint)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request body of AWS's CompleteMultipartUpload documentation example.
    #[test]
    fn parses_aws_complete_upload_example() {
        let body = br#"<CompleteMultipartUpload>
  <Part>
    <PartNumber>1</PartNumber>
    <ETag>"a54357aff0632cce46d942af68356b38"</ETag>
  </Part>
  <Part>
    <PartNumber>2</PartNumber>
    <ETag>"0c78aef83f66abc1fa1e8477f296d394"</ETag>
  </Part>
  <Part>
    <PartNumber>3</PartNumber>
    <ETag>"acbd18db4cc2f85cedef654fccc4a4d8"</ETag>
  </Part>
</CompleteMultipartUpload>"#;
        let parts = parse_complete_upload(body).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].number, 1);
        assert_eq!(parts[0].etag, "\"a54357aff0632cce46d942af68356b38\"");
        assert_eq!(parts[2].number, 3);
    }

    #[test]
    fn accepts_namespace_declaration_escapes_and_checksums() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><ETag>&quot;abc&quot;</ETag><PartNumber>7</PartNumber><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part></CompleteMultipartUpload>"#;
        let parts = parse_complete_upload(body).unwrap();
        assert_eq!(
            parts,
            vec![CompletedPart {
                number: 7,
                etag: "\"abc\"".into(),
                checksums: vec![StoredChecksum {
                    algorithm: "CRC32".into(),
                    value: "AAAAAA==".into()
                }],
            }]
        );
    }

    #[test]
    fn rejects_malformed_complete_upload_bodies() {
        let cases: &[&[u8]] = &[
            b"",
            b"   ",
            b"not xml",
            b"<CompleteMultipartUpload>",
            b"<CompleteMultipartUpload></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Prt></CompleteMultipartUpload>",
            b"<Wrong><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></Wrong>",
            b"<CompleteMultipartUpload><Part><ETag>x</ETag></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>one</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>-1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><PartNumber>2</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag></ETag></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag><Size>3</Size></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Other/></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload>text<Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload><CompleteMultipartUpload/>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&bogus;</ETag></Part></CompleteMultipartUpload>",
            b"<!DOCTYPE x [<!ENTITY a \"b\">]><CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&a;</ETag></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\xff</ETag></Part></CompleteMultipartUpload>",
            b"trailing<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>",
        ];
        for body in cases {
            let err = parse_complete_upload(body).expect_err(&String::from_utf8_lossy(body));
            assert_eq!(err, MalformedXml, "{}", String::from_utf8_lossy(body));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        #[test]
        fn any_body_parses_or_is_malformed(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let _ = parse_document(&body);
            let _ = parse_complete_upload(&body);
            let _ = parse_delete_objects(&body);
            let _ = parse_create_bucket(&body);
        }

        /// Text that looks like XML (tags, entities, CDATA, comments in any
        /// order) gets further into the parser than random bytes do.
        #[test]
        fn xml_like_text_parses_or_is_malformed(
            pieces in proptest::collection::vec(proptest::sample::select(vec![
                "<Delete>", "</Delete>", "<Object>", "</Object>", "<Key>", "</Key>", "k",
                "<Part>", "</Part>", "<PartNumber>", "</PartNumber>", "1", "<ETag>", "</ETag>",
                "<CompleteMultipartUpload>", "</CompleteMultipartUpload>", "&amp;", "&bogus;",
                "<![CDATA[x]]>", "<!-- c -->", "<?xml version=\"1.0\"?>", "<a/>", " ", "<",
            ]), 0..40),
        ) {
            let body = pieces.concat();
            let _ = parse_complete_upload(body.as_bytes());
            let _ = parse_delete_objects(body.as_bytes());
        }

        /// Every well-formed CompleteMultipartUpload lists its parts in order.
        #[test]
        fn complete_upload_bodies_list_their_parts(numbers in proptest::collection::vec(1u32..=10_000, 1..50)) {
            let parts: String = numbers
                .iter()
                .map(|n| format!("<Part><PartNumber>{n}</PartNumber><ETag>\"e{n}\"</ETag></Part>"))
                .collect();
            let body = format!("<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>");
            let parsed = parse_complete_upload(body.as_bytes()).unwrap();
            let got: Vec<u32> = parsed.iter().map(|p| p.number).collect();
            proptest::prop_assert_eq!(got, numbers);
        }
    }

    #[test]
    fn element_counts_are_bounded_while_parsing() {
        let within = |n: usize, max: usize| {
            let body = format!("<r>{}</r>", "<a/>".repeat(n - 1));
            parse_document_within(body.as_bytes(), max)
        };
        assert!(within(10, 10).is_ok());
        assert_eq!(within(11, 10).unwrap_err(), MalformedXml);
        // Far more tiny elements than any S3 document has: refused, however
        // small the body.
        assert_eq!(
            within(MAX_ELEMENTS + 1, MAX_ELEMENTS).unwrap_err(),
            MalformedXml
        );
        assert!(within(MAX_ELEMENTS, MAX_ELEMENTS).is_ok());
        // A DeleteObjects body of 1,000 whole entries fits its bound, and
        // one padded with empty elements does not.
        let entry = "<Object><Key>k</Key><VersionId>null</VersionId><ETag>e</ETag>\
                     <LastModifiedTime>t</LastModifiedTime><Size>1</Size></Object>";
        let full = format!(
            "<Delete><Quiet>true</Quiet>{}</Delete>",
            entry.repeat(MAX_DELETE_KEYS)
        );
        assert!(parse_delete_objects(full.as_bytes()).is_ok());
        let padded = format!(
            "<Delete>{}<Object><Key>k</Key></Object></Delete>",
            "<x/>".repeat(MAX_DELETE_ELEMENTS)
        );
        assert_eq!(
            parse_delete_objects(padded.as_bytes()).unwrap_err(),
            MalformedXml
        );
    }

    #[test]
    fn rejects_deep_nesting() {
        let body = format!("{}{}", "<a>".repeat(40), "</a>".repeat(40));
        assert_eq!(parse_document(body.as_bytes()).unwrap_err(), MalformedXml);
    }

    /// The request body of AWS's DeleteObjects documentation example, plus Quiet.
    #[test]
    fn parses_delete_objects() {
        let body = br#"<Delete>
  <Object>
    <Key>sample1.txt</Key>
  </Object>
  <Object>
    <Key> spaced key </Key>
    <VersionId>null</VersionId>
  </Object>
  <Quiet>true</Quiet>
</Delete>"#;
        let request = parse_delete_objects(body).unwrap();
        let keys: Vec<(&str, Option<&str>)> = request
            .objects
            .iter()
            .map(|o| (o.key.as_str(), o.version_id.as_deref()))
            .collect();
        assert_eq!(
            keys,
            [("sample1.txt", None), (" spaced key ", Some("null"))]
        );
        assert!(request.quiet);
        let many = format!(
            "<Delete>{}</Delete>",
            "<Object><Key>k</Key></Object>".repeat(1001)
        );
        for bad in [
            &b"<Delete></Delete>"[..],
            b"<Delete><Object></Object></Delete>",
            b"<Delete><Object><Key></Key></Object></Delete>",
            b"<Delete><Object><Key>a</Key><Key>b</Key></Object></Delete>",
            b"<Delete><Object><Key>a</Key><Other/></Object></Delete>",
            b"<Delete><Object><Key>a</Key></Object><Quiet>yes</Quiet></Delete>",
            b"<Remove><Object><Key>a</Key></Object></Remove>",
            many.as_bytes(),
        ] {
            let err = parse_delete_objects(bad).unwrap_err();
            assert_eq!(err, MalformedXml, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn parses_create_bucket_configuration() {
        assert_eq!(parse_create_bucket(b"").unwrap(), None);
        let body = br#"<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
   <LocationConstraint>us-west-1</LocationConstraint>
</CreateBucketConfiguration>"#;
        assert_eq!(
            parse_create_bucket(body).unwrap().as_deref(),
            Some("us-west-1")
        );
        let empty = b"<CreateBucketConfiguration><LocationConstraint/></CreateBucketConfiguration>";
        assert_eq!(parse_create_bucket(empty).unwrap(), None);
        for bad in [
            &b"<CreateBucketConfiguration>"[..],
            b"<Other/>",
            b"<CreateBucketConfiguration><Acl/></CreateBucketConfiguration>",
        ] {
            assert_eq!(parse_create_bucket(bad).unwrap_err(), MalformedXml);
        }
    }
}
