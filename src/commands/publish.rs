//! `publish` and `bundle-verify --git` (contracts/bundle.md
//! §publish): a run's bundle members as a git tree, one commit per
//! publish onto `refs/bluetape/runs/<run_id>`, the ref moved only by
//! compare-and-swap and only forward. A publication writes only the
//! objects that are new: the receipt's full segments of the previous
//! publication are kept by id, so publishing one event writes about the
//! same whatever the run's length; the receipt is verified and replayed in
//! full first (O(n) reading, as every bundle).

use crate::coordinator::decide::{InputRefusal, InputRule};
use crate::store::root::StateRoot;
use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::bundle::{
    Content, MemberSource, Replayed, bundle_error, plan_with, replay_full, verified_output,
    verify_members, with_content,
};
use super::error::{FlowError, FlowResult};
use crate::coordinator::raced::PublishRefusal;
use crate::receipt::bundle::{BundleError, Class, INDEX, Index, Member, SEGMENT_EVENTS, classify};
use crate::store::git::{Git, Objects, TreeEntry};

fn repo_root(replayed: &Replayed) -> Option<std::path::PathBuf> {
    replayed
        .run
        .repo_root()
        .ok()
        .flatten()
        .map(std::path::PathBuf::from)
}

/// What a commit of a publication holds.
struct Published {
    index: Index,
    entries: BTreeMap<String, TreeEntry>,
}

fn read_published(
    git: &Git,
    objects: &mut Objects,
    commit: &str,
    sizes: bool,
) -> FlowResult<Published> {
    let refused = |m: String| bundle_error(BundleError::Refused(m));
    let mut entries = BTreeMap::new();
    for entry in git.ls_tree(commit, sizes)? {
        if entry.mode != "100644" || entry.kind != "blob" {
            return Err(refused(format!(
                "publication {commit} holds {} of mode {} ({}): only regular files are allowed",
                entry.path, entry.mode, entry.kind
            )));
        }
        entries.insert(entry.path.clone(), entry);
    }
    let index_entry = entries
        .get(INDEX)
        .ok_or_else(|| refused(format!("publication {commit} has no index.json")))?;
    let bytes = objects.read_all(&index_entry.id, Class::Index.limit())?;
    let index = Index::parse(&bytes).map_err(bundle_error)?;
    let names: Vec<&str> = entries.keys().map(String::as_str).collect();
    let mut expected: Vec<&str> = index.members.iter().map(|m| m.name.as_str()).collect();
    expected.push(INDEX);
    expected.sort_unstable();
    if names != expected {
        return Err(refused(format!(
            "publication {commit}'s tree does not hold exactly its index's members"
        )));
    }
    for member in index.members.iter().filter(|_| sizes) {
        if entries[&member.name].size != Some(member.size) {
            return Err(refused(format!(
                "publication {commit}: member {} does not match its size in the index",
                member.name
            )));
        }
    }
    Ok(Published { index, entries })
}

/// The namespace `publish` writes (and `git fetch origin
/// 'refs/bluetape/*:refs/bluetape/*'` brings to an auditor).
pub const PUBLICATION_REFS: &str = "refs/bluetape/";

/// What `publish` answers: the publication's commit on its ref.
#[derive(Debug, Serialize)]
pub struct PublishAnswer {
    /// The publication's commit (the previous one when `unchanged`).
    pub commit: Option<String>,
    /// The commit the ref named before (null for a first publication).
    pub previous: Option<String>,
    #[serde(rename = "ref")]
    pub reference: String,
    pub repo: String,
    pub run_id: String,
    /// The receipt's length in the publication.
    pub sequence: u64,
    /// Present (true) when nothing was new: no commit was made.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
}

/// `publish`: commit the run's bundle members onto `reference` of `repo`.
pub fn publish(
    root: &StateRoot,
    run_id: &str,
    repo: Option<&Path>,
    reference: Option<&str>,
    cwd: &Path,
) -> FlowResult<PublishAnswer> {
    if let Some(reference) = reference.filter(|r| !r.starts_with(PUBLICATION_REFS)) {
        // A branch or a tag is never written: publish would commit the
        // bundle over its history (DEVIATIONS 90).
        return Err(FlowError::from(InputRefusal::NotPublicationRef {
            reference: reference.into(),
            under: PUBLICATION_REFS,
            run_id: run_id.into(),
        }));
    }
    // What is published is a bundle, a verdict an auditor reads
    // (trust-model promise 1): the state it rests on (which reports are
    // bound, the first event's recovery facts) is a full replay's, never
    // the checkpoint's.
    let replayed = replay_full(root, run_id)?;
    let repo = match repo {
        Some(dir) => cwd.join(dir),
        None => repo_root(&replayed).ok_or_else(|| FlowError::from(InputRule::NoRepoToPublish))?,
    };
    let git = Git::open(&repo)?;
    let reference = reference
        .map(str::to_string)
        .unwrap_or_else(|| format!("refs/bluetape/runs/{run_id}"));
    if !git.check_ref(&reference) {
        return Err(FlowError::from(InputRefusal::InvalidRef { reference }));
    }
    let previous = git.resolve(&reference)?;
    let mut objects = git.objects()?;
    let mut kept: Vec<Member> = Vec::new();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    let mut old_bytes = None;
    if let Some(commit) = &previous {
        // Sizes are not read here: bundle-verify --git checks them.
        let published = read_published(&git, &mut objects, commit, false)?;
        let old = &published.index;
        if old.run_id != run_id {
            return Err(FlowError::from(PublishRefusal::OtherRun {
                reference,
                run_id: old.run_id.clone(),
            }));
        }
        let ours = &replayed.position;
        let extends = old.sequence <= ours.sequence
            && replayed
                .run
                .dir
                .find_line(old.sequence, ours.byte_length, |line| {
                    serde_json::from_slice::<Value>(line)
                        .ok()?
                        .get("sequence")?
                        .as_u64()
                })?
                .and_then(|line| serde_json::from_slice::<Value>(&line).ok())
                .and_then(|e| {
                    e.get("checksum")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .is_some_and(|c| c == old.checksum);
        if !extends {
            return Err(FlowError::from(PublishRefusal::NotExtending {
                reference,
                sequence: old.sequence,
                checksum: old.checksum.clone(),
            }));
        }
        // Full segments are the same bytes: keep them by id.
        for member in &old.members {
            if classify(&member.name) == Some(Class::Receipt)
                && crate::receipt::bundle::segment_first(&member.name)
                    .is_some_and(|first| first + SEGMENT_EVENTS - 1 <= old.sequence)
            {
                ids.insert(
                    member.name.clone(),
                    published.entries[&member.name].id.clone(),
                );
                kept.push(member.clone());
            }
        }
        // Other members whose bytes did not change keep their ids too.
        for member in &old.members {
            ids.entry(format!("{}\0{}", member.name, member.sha256))
                .or_insert_with(|| published.entries[&member.name].id.clone());
        }
        old_bytes = Some(old.to_bytes());
    }
    drop(objects);
    let plan = plan_with(&replayed, &kept)?;
    let mut message = format!(
        "bluetape-flow publish {run_id} at {}\n",
        plan.index.sequence
    );
    if old_bytes.as_deref() == Some(&plan.index_bytes[..]) {
        // Nothing new: the publication stands as it is.
        message.clear();
    }
    if message.is_empty() {
        return Ok(PublishAnswer {
            commit: previous.clone(),
            previous,
            reference,
            repo: repo.to_string_lossy().into_owned(),
            run_id: run_id.to_string(),
            sequence: plan.index.sequence,
            unchanged: true,
        });
    }
    // Blobs: the index and every member not already in the repository.
    let mut files: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let index_id = git.hash_object(&plan.index_bytes)?;
    files
        .entry(String::new())
        .or_default()
        .push((INDEX.to_string(), index_id));
    for (member, content) in plan.index.members.iter().zip(&plan.contents) {
        let known = ids
            .get(&member.name)
            .filter(|_| matches!(content, Content::Receipt { .. }))
            .or_else(|| ids.get(&format!("{}\0{}", member.name, member.sha256)))
            .cloned();
        let id = match known {
            Some(id) => id,
            None => {
                let bytes = with_content(&replayed, member, content, |reader| {
                    let mut bytes = Vec::with_capacity(member.size as usize);
                    std::io::Read::read_to_end(reader, &mut bytes)?;
                    Ok(bytes)
                })?;
                git.hash_object(&bytes)?
            }
        };
        let (dir, file) = match member.name.split_once('/') {
            Some((dir, file)) => (dir.to_string(), file.to_string()),
            None => (String::new(), member.name.clone()),
        };
        files.entry(dir).or_default().push((file, id));
    }
    let mut top: Vec<(&str, &str, String, String)> = Vec::new();
    for (dir, entries) in &files {
        let rows: Vec<(&str, &str, String, String)> = entries
            .iter()
            .map(|(name, id)| ("100644", "blob", id.clone(), name.clone()))
            .collect();
        if dir.is_empty() {
            top.extend(rows);
        } else {
            let tree = git.mktree(&rows)?;
            top.push(("040000", "tree", tree, dir.clone()));
        }
    }
    let tree = git.mktree(&top)?;
    let commit = git.commit_tree(&tree, previous.as_deref(), &message)?;
    if !git.update_ref(&reference, &commit, previous.as_deref())? {
        return Err(FlowError::from(PublishRefusal::RefMoved { reference }));
    }
    Ok(PublishAnswer {
        commit: Some(commit),
        previous,
        reference,
        repo: repo.to_string_lossy().into_owned(),
        run_id: run_id.to_string(),
        sequence: plan.index.sequence,
        unchanged: false,
    })
}

/// Members of one commit, read from git objects.
struct GitSource<'a> {
    objects: &'a mut Objects,
    entries: &'a BTreeMap<String, TreeEntry>,
}

impl MemberSource for GitSource<'_> {
    fn begin(&mut self, member: &Member) -> Result<(), BundleError> {
        let entry = self
            .entries
            .get(&member.name)
            .ok_or_else(|| BundleError::Refused(format!("member {} is missing", member.name)))?;
        let size = self
            .objects
            .open(&entry.id)
            .map_err(|e| BundleError::Malformed(FlowError::from(e).message().to_string()))?;
        if size != member.size {
            return Err(BundleError::Refused(format!(
                "member {} does not match its size in the index",
                member.name
            )));
        }
        Ok(())
    }
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, BundleError> {
        self.objects
            .read(buf)
            .map_err(|e| BundleError::Malformed(FlowError::from(e).message().to_string()))
    }
    fn end(&mut self, _member: &Member) -> Result<(), BundleError> {
        Ok(())
    }
}

/// `older` is a publication `newer` extends: the same run, manifest,
/// policy and quarantine, its receipt a byte prefix of the newer one, its
/// heads and reports kept.
fn check_extends(
    objects: &mut Objects,
    older: &Published,
    newer: &Published,
    commit: &str,
) -> FlowResult<()> {
    let refused = |why: String| {
        bundle_error(BundleError::Refused(format!(
            "publication history is not append-only at {commit}: {why}"
        )))
    };
    if older.index.run_id != newer.index.run_id {
        return Err(refused("it is of another run".into()));
    }
    if older.index.sequence > newer.index.sequence {
        return Err(refused(format!(
            "its receipt has {} events and the next one {}",
            older.index.sequence, newer.index.sequence
        )));
    }
    let last = older
        .index
        .members
        .iter()
        .rfind(|m| classify(&m.name) == Some(Class::Receipt))
        .map(|m| m.name.clone());
    for member in &older.index.members {
        let class = classify(&member.name);
        let old_id = &older.entries[&member.name].id;
        let Some(new) = newer.entries.get(&member.name) else {
            return Err(refused(format!(
                "{} is gone from the next one",
                member.name
            )));
        };
        if &new.id == old_id {
            continue;
        }
        if class == Some(Class::Receipt) && Some(&member.name) == last.as_ref() {
            // The older last segment must be a prefix of the newer one.
            let old_bytes = objects.read_all(old_id, Class::Receipt.limit())?;
            let new_bytes = objects.read_all(&new.id, Class::Receipt.limit())?;
            if new_bytes.starts_with(&old_bytes) {
                continue;
            }
            return Err(refused(format!(
                "its receipt is not a prefix of the next one ({})",
                member.name
            )));
        }
        return Err(refused(format!("{} changed in the next one", member.name)));
    }
    Ok(())
}

/// `bundle-verify --git DIR --ref REF`: the newest publication in full,
/// and every older one as a prefix of the next.
pub fn verify_git(
    root: &StateRoot,
    dir: &Path,
    reference: &str,
    keys: &[std::path::PathBuf],
    head: Option<&Path>,
    at: &str,
) -> FlowResult<super::bundle::BundleVerified> {
    super::views::check_at(at)?;
    let (keys, head) = super::bundle::load_checks(root, keys, head)?;
    let git = Git::open(dir)?;
    if git.resolve(reference)?.is_none() {
        // Most often a clone that has not fetched the publications.
        return Err(FlowError::from(InputRefusal::RefNotCommit {
            reference: reference.into(),
            dir: dir.display().to_string(),
            under: PUBLICATION_REFS,
        }));
    }
    let history = git.history(reference)?;
    for (i, (commit, parents)) in history.iter().enumerate() {
        let expected: Vec<String> = history
            .get(i + 1)
            .map(|c| c.0.clone())
            .into_iter()
            .collect();
        if parents != &expected {
            return Err(bundle_error(BundleError::Refused(format!(
                "publication history is not a single line of commits at {commit}"
            ))));
        }
    }
    let mut objects = git.objects()?;
    let tip = read_published(&git, &mut objects, &history[0].0, true)?;
    let verified = {
        let mut source = GitSource {
            objects: &mut objects,
            entries: &tip.entries,
        };
        verify_members(
            tip.index.clone(),
            &mut source,
            keys.as_ref(),
            head.as_deref(),
        )?
    };
    let mut newer = tip;
    for (commit, _) in history.iter().skip(1) {
        let older = read_published(&git, &mut objects, commit, true)?;
        check_extends(&mut objects, &older, &newer, commit)?;
        newer = older;
    }
    let mut answer = verified_output(&verified, at);
    answer.publication = Some(super::bundle::Publications {
        publications: history.len(),
        reference: reference.to_string(),
        commit: history[0].0.clone(),
    });
    Ok(answer)
}
