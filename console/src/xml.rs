//! Reading the gateway's XML answers: the elements of interest with the
//! text of their leaf children, in document order (ListObjectVersions
//! interleaves `Version` and `DeleteMarker`, which a serde struct would not
//! keep in order).

use quick_xml::events::Event;
use quick_xml::Reader;
use std::collections::HashMap;

/// An element's leaf children by name (the last one when repeated).
pub(crate) type Fields = HashMap<String, String>;

/// Every element named in `names`, at any depth, in document order, each
/// with the text of its direct children. Nested elements of interest are
/// found too (`Bucket` inside `Buckets`). Malformed XML is an error.
pub(crate) fn elements(xml: &[u8], names: &[&str]) -> Result<Vec<(String, Fields)>, String> {
    let mut reader = Reader::from_reader(xml);
    let mut found: Vec<(String, Fields)> = Vec::new();
    // Per open element: its name, and where it is in `found` when wanted.
    let mut open: Vec<(String, Option<usize>)> = Vec::new();
    let mut text = String::new();
    let mut buf = Vec::new();
    loop {
        match reader
            .read_event_into(&mut buf)
            .map_err(|e| e.to_string())?
        {
            Event::Start(start) => {
                let name = String::from_utf8_lossy(start.local_name().as_ref()).into_owned();
                let slot = names.contains(&name.as_str()).then(|| {
                    found.push((name.clone(), Fields::new()));
                    found.len() - 1
                });
                open.push((name, slot));
                text.clear();
            }
            Event::Empty(empty) => {
                let name = String::from_utf8_lossy(empty.local_name().as_ref()).into_owned();
                if names.contains(&name.as_str()) {
                    found.push((name.clone(), Fields::new()));
                }
                if let Some(parent) = open.last().and_then(|(_, slot)| *slot) {
                    found[parent].1.insert(name, String::new());
                }
            }
            Event::Text(t) => text.push_str(&t.unescape().map_err(|e| e.to_string())?),
            Event::CData(t) => text.push_str(&String::from_utf8_lossy(&t)),
            Event::End(_) => {
                let (name, _) = open.pop().ok_or("unbalanced XML")?;
                if let Some(parent) = open.last().and_then(|(_, slot)| *slot) {
                    found[parent].1.insert(name, std::mem::take(&mut text));
                }
                text.clear();
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !open.is_empty() {
        return Err("the XML ends inside an element".into());
    }
    Ok(found)
}

/// The fields of the first element named `name`, or empty ones.
pub(crate) fn first(xml: &[u8], name: &str) -> Result<Fields, String> {
    Ok(elements(xml, &[name])?
        .into_iter()
        .next()
        .map(|(_, fields)| fields)
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_gives_its_objects_prefixes_and_own_fields() {
        // The example of ListObjectsV2 in the S3 API reference, with a prefix.
        let xml = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix/><KeyCount>205</KeyCount><MaxKeys>1000</MaxKeys>
  <IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
  <Contents><Key>my-image.jpg</Key><LastModified>2009-10-12T17:50:30.000Z</LastModified>
    <ETag>"fba9dede5f27731c9771645a39863328"</ETag><Size>434234</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>a &amp; b.txt</Key><Size>1</Size></Contents>
  <CommonPrefixes><Prefix>photos/</Prefix></CommonPrefixes>
</ListBucketResult>"#;
        let found = elements(xml, &["ListBucketResult", "Contents", "CommonPrefixes"]).unwrap();
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["ListBucketResult", "Contents", "Contents", "CommonPrefixes"]
        );
        assert_eq!(found[0].1["IsTruncated"], "true");
        assert_eq!(found[0].1["Prefix"], "");
        assert_eq!(
            found[0].1["NextContinuationToken"],
            "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="
        );
        assert_eq!(found[1].1["ETag"], "\"fba9dede5f27731c9771645a39863328\"");
        assert_eq!(found[1].1["Size"], "434234");
        assert_eq!(found[2].1["Key"], "a & b.txt");
        assert_eq!(found[3].1["Prefix"], "photos/");
    }

    #[test]
    fn versions_and_delete_markers_keep_their_order() {
        let xml = br#"<ListVersionsResult><Name>b</Name>
<DeleteMarker><Key>k</Key><VersionId>3</VersionId><IsLatest>true</IsLatest></DeleteMarker>
<Version><Key>k</Key><VersionId>2</VersionId><IsLatest>false</IsLatest><Size>5</Size></Version>
<DeleteMarker><Key>k</Key><VersionId>1</VersionId><IsLatest>false</IsLatest></DeleteMarker>
</ListVersionsResult>"#;
        let found = elements(xml, &["Version", "DeleteMarker"]).unwrap();
        let order: Vec<(&str, &str)> = found
            .iter()
            .map(|(n, f)| (n.as_str(), f["VersionId"].as_str()))
            .collect();
        assert_eq!(
            order,
            [
                ("DeleteMarker", "3"),
                ("Version", "2"),
                ("DeleteMarker", "1")
            ]
        );
    }

    #[test]
    fn nested_elements_are_found_and_bad_xml_is_an_error() {
        let xml = b"<ListAllMyBucketsResult><Owner><ID>x</ID></Owner><Buckets>\
<Bucket><Name>a</Name><CreationDate>2026-01-01T00:00:00.000Z</CreationDate></Bucket>\
<Bucket><Name>b</Name></Bucket></Buckets></ListAllMyBucketsResult>";
        let buckets = elements(xml, &["Bucket"]).unwrap();
        assert_eq!(buckets.len(), 2);
        assert_eq!(buckets[1].1["Name"], "b");
        assert_eq!(first(xml, "Owner").unwrap()["ID"], "x");
        assert!(first(xml, "Missing").unwrap().is_empty());
        assert!(elements(b"<a><b>x</b>", &["a"]).is_err());
        assert!(elements(b"<a><b>x</c></a>", &["a"]).is_err());
    }
}
