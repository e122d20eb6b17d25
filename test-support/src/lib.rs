//! Tessera's test harnesses, one copy for every crate's integration tests:
//! a real meta and datanodes in process ([`cluster`]), the meta service over
//! either transport ([`meta`]), one block server without meta ([`node`]), an
//! S3 gateway with a SigV4 signer ([`s3`]), a proxy that stalls a peer
//! ([`proxy`]), cluster CAs for mutual TLS ([`certs`]), and test data
//! ([`data`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod certs;
pub mod cluster;
pub mod data;
pub mod meta;
pub mod node;
pub mod proxy;
pub mod s3;
pub mod streams;
