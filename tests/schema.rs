//! The committed JSON Schema must be exactly what the Rust types generate.
//! Regenerate with: XRUNLAB_BLESS=1 cargo test --test schema

use std::path::Path;

#[test]
fn committed_schema_matches_types() {
    let generated = xrunlab::results::schema_json();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/result.schema.json");
    if std::env::var_os("XRUNLAB_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "schema/result.schema.json is out of date with the result types: run XRUNLAB_BLESS=1 cargo test --test schema and commit it"
    );
}
