//! Receipt formats: canonical JSON, the event contract, the manifest
//! contract and streaming verification. Pure: no filesystem access.

pub mod bundle;
pub mod canonical;
pub mod canonical_parse;
pub mod event;
pub mod faults;
pub mod json_ref;
pub mod lax_time;
pub mod manifest;
pub mod merkle;
pub mod primitives;
pub mod rules;
pub mod schema;
pub mod scope;
pub mod signed_head;
pub mod verify;
pub mod vocab;
