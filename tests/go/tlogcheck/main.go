// tlogcheck: checks bluetape-flow's signed heads, stored tree hashes and
// proofs with Go's own golang.org/x/mod/sumdb/note and sumdb/tlog (Debian's
// golang-golang-x-mod-dev), verifiers that bluetape-flow did not write.
//
// Built by tests/transparency.rs in GOPATH mode (GO111MODULE=off,
// GOPATH=/usr/share/gocode); nothing is downloaded. Usage:
//
//	tlogcheck JOB.json
//
// JOB.json names the trusted verifier keys, the expected origin, the run's
// receipt, its tree-hashes file, signed heads, proofs that must verify,
// proofs that must be refused, and proofs, notes and keys whose every bit
// is flipped. It prints one JSON object: counts, and `errors` (any outcome
// that is not the expected one). Exit status 0 means it ran; the test reads
// the counts and the errors.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type inclusion struct {
	Proof  string   `json:"proof"`
	Event  string   `json:"event"`
	Vkeys  []string `json:"vkeys"`
	Origin string   `json:"origin"`
	Why    string   `json:"why"`
	Sweep  bool     `json:"sweep"`
}

type consistency struct {
	OldNote string   `json:"old_note"`
	NewNote string   `json:"new_note"`
	OldSize int64    `json:"old_size"`
	NewSize int64    `json:"new_size"`
	Hashes  []string `json:"hashes"`
	Vkeys   []string `json:"vkeys"`
	Origin  string   `json:"origin"`
	Why     string   `json:"why"`
	Sweep   bool     `json:"sweep"`
}

type job struct {
	Origin            string        `json:"origin"`
	Vkeys             []string      `json:"vkeys"`
	Receipt           string        `json:"receipt"`
	TreeHashes        string        `json:"tree_hashes"`
	Heads             []string      `json:"heads"`
	Inclusion         []inclusion   `json:"inclusion"`
	Consistency       []consistency `json:"consistency"`
	RefuseInclusion   []inclusion   `json:"refuse_inclusion"`
	RefuseConsistency []consistency `json:"refuse_consistency"`
	RefuseNotes       []string      `json:"refuse_notes"`
	KeySweepNote      string        `json:"key_sweep_note"`
}

// trust is what a refusal case is checked against: its own keys and
// origin where it names them, the job's otherwise.
func (j job) trust(keys []string, origin string) ([]string, string) {
	if keys == nil {
		keys = j.Vkeys
	}
	if origin == "" {
		origin = j.Origin
	}
	return keys, origin
}

type result struct {
	Leaves          int      `json:"leaves"`
	TreeHashesEqual bool     `json:"tree_hashes_equal"`
	HeadsOK         int      `json:"heads_ok"`
	InclusionOK     int      `json:"inclusion_ok"`
	ConsistencyOK   int      `json:"consistency_ok"`
	Refused         int      `json:"refused"`
	SweepRefused    int      `json:"sweep_refused"`
	SweepEquivalent int      `json:"sweep_equivalent"`
	Errors          []string `json:"errors"`
}

// hashes is Go tlog's own stored-hash storage, built from the receipt.
type hashes []tlog.Hash

func (h hashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(h)) {
			return nil, errors.New("index not stored")
		}
		out[i] = h[x]
	}
	return out, nil
}

func verifiers(keys []string) (note.Verifiers, error) {
	var list []note.Verifier
	for _, k := range keys {
		v, err := note.NewVerifier(k)
		if err != nil {
			return nil, err
		}
		list = append(list, v)
	}
	return note.VerifierList(list...), nil
}

type head struct {
	origin string
	size   int64
	root   tlog.Hash
}

// openHead opens a signed note with Go's note.Open and reads the C2SP
// checkpoint's first three lines (origin, size, root).
func openHead(msg []byte, keys []string, origin string) (head, error) {
	known, err := verifiers(keys)
	if err != nil {
		return head{}, err
	}
	n, err := note.Open(msg, known)
	if err != nil {
		return head{}, err
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 {
		return head{}, errors.New("checkpoint too short")
	}
	if lines[0] != origin {
		return head{}, fmt.Errorf("origin %q, want %q", lines[0], origin)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 1 || strconv.FormatInt(size, 10) != lines[1] {
		return head{}, errors.New("bad size line")
	}
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return head{}, errors.New("bad root line")
	}
	var h tlog.Hash
	copy(h[:], root)
	return head{lines[0], size, h}, nil
}

func decodeHash(s string) (tlog.Hash, error) {
	var h tlog.Hash
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != tlog.HashSize {
		return h, errors.New("bad hash")
	}
	copy(h[:], b)
	return h, nil
}

// checkInclusion checks a c2sp.org/tlog-proof@v1 text for an event line
// with tlog.CheckRecord against the note's root.
func checkInclusion(proof, event []byte, keys []string, origin string) error {
	split := bytes.Index(proof, []byte("\n\n"))
	if split < 0 {
		return errors.New("no blank line")
	}
	lines := strings.Split(string(proof[:split]), "\n")
	if len(lines) < 2 || lines[0] != "c2sp.org/tlog-proof@v1" {
		return errors.New("bad header")
	}
	rest := lines[1:]
	if strings.HasPrefix(rest[0], "extra ") {
		rest = rest[1:]
	}
	if len(rest) == 0 || !strings.HasPrefix(rest[0], "index ") {
		return errors.New("no index line")
	}
	indexText := strings.TrimPrefix(rest[0], "index ")
	index, err := strconv.ParseInt(indexText, 10, 64)
	if err != nil || index < 0 || strconv.FormatInt(index, 10) != indexText {
		return errors.New("bad index")
	}
	var p tlog.RecordProof
	for _, l := range rest[1:] {
		h, err := decodeHash(l)
		if err != nil {
			return err
		}
		p = append(p, h)
	}
	h, err := openHead(proof[split+2:], keys, origin)
	if err != nil {
		return err
	}
	// The event says which record it is.
	var ev struct {
		Sequence int64 `json:"sequence"`
	}
	if json.Unmarshal(event, &ev) != nil || ev.Sequence != index+1 {
		return errors.New("event sequence is not index+1")
	}
	return tlog.CheckRecord(p, h.size, h.root, index, tlog.RecordHash(event))
}

func checkConsistency(c consistency, keys []string, origin string) error {
	old, err := openHead([]byte(c.OldNote), keys, origin)
	if err != nil {
		return fmt.Errorf("old: %w", err)
	}
	nw, err := openHead([]byte(c.NewNote), keys, origin)
	if err != nil {
		return fmt.Errorf("new: %w", err)
	}
	if old.size != c.OldSize || nw.size != c.NewSize {
		return errors.New("sizes are not the notes' sizes")
	}
	var p tlog.TreeProof
	for _, s := range c.Hashes {
		h, err := decodeHash(s)
		if err != nil {
			return err
		}
		p = append(p, h)
	}
	return tlog.CheckTree(p, nw.size, nw.root, old.size, old.root)
}

// canonicalNote re-encodes every signature line's base64 canonically: a
// note Go accepted after a bit flip is "equivalent" when this gives back
// the original (Go's base64 ignores the unused trailing bits).
func canonicalNote(msg []byte) []byte {
	split := bytes.LastIndex(msg, []byte("\n\n"))
	if split < 0 {
		return msg
	}
	out := append([]byte{}, msg[:split+2]...)
	for _, line := range strings.Split(strings.TrimSuffix(string(msg[split+2:]), "\n"), "\n") {
		parts := strings.SplitN(line, " ", 3)
		if len(parts) == 3 {
			if raw, err := base64.StdEncoding.DecodeString(parts[2]); err == nil {
				line = parts[0] + " " + parts[1] + " " + base64.StdEncoding.EncodeToString(raw)
			}
		}
		out = append(out, line+"\n"...)
	}
	return out
}

func canonicalProof(proof []byte) []byte {
	split := bytes.Index(proof, []byte("\n\n"))
	if split < 0 {
		return proof
	}
	return append(append([]byte{}, proof[:split+2]...), canonicalNote(proof[split+2:])...)
}

// canonicalKey lowercases the key hash (Go's ParseUint reads either case).
func canonicalKey(key string) string {
	parts := strings.SplitN(key, "+", 3)
	if len(parts) != 3 {
		return key
	}
	return parts[0] + "+" + strings.ToLower(parts[1]) + "+" + parts[2]
}

func flip(b []byte, i, bit int) []byte {
	c := append([]byte{}, b...)
	c[i] ^= 1 << bit
	return c
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tlogcheck JOB.json")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var j job
	if err := json.Unmarshal(raw, &j); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var r result
	fail := func(format string, a ...interface{}) {
		r.Errors = append(r.Errors, fmt.Sprintf(format, a...))
	}

	// The tree, by Go, from the receipt's lines (leaf = line without LF).
	receipt, err := os.ReadFile(j.Receipt)
	if err != nil {
		fail("receipt: %v", err)
	}
	var stored hashes
	lines := bytes.Split(receipt, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	for i, line := range lines {
		hs, err := tlog.StoredHashes(int64(i), line, stored)
		if err != nil {
			fail("StoredHashes(%d): %v", i, err)
			break
		}
		stored = append(stored, hs...)
	}
	r.Leaves = len(lines)
	if j.TreeHashes != "" {
		file, err := os.ReadFile(j.TreeHashes)
		if err != nil {
			fail("tree-hashes: %v", err)
		}
		var want []byte
		for _, h := range stored {
			want = append(want, h[:]...)
		}
		r.TreeHashesEqual = bytes.Equal(file, want)
		if !r.TreeHashesEqual {
			fail("tree-hashes (%d bytes) is not Go's stored hashes (%d bytes)", len(file), len(want))
		}
	}

	for i, msg := range j.Heads {
		h, err := openHead([]byte(msg), j.Vkeys, j.Origin)
		if err != nil {
			fail("head %d: note.Open: %v", i, err)
			continue
		}
		if h.size > int64(len(lines)) {
			fail("head %d: size %d beyond the receipt's %d lines", i, h.size, len(lines))
			continue
		}
		root, err := tlog.TreeHash(h.size, stored)
		if err != nil || root != h.root {
			fail("head %d: TreeHash(%d) = %v, note says %v (%v)", i, h.size, root, h.root, err)
			continue
		}
		r.HeadsOK++
	}

	for i, c := range j.Inclusion {
		if err := checkInclusion([]byte(c.Proof), []byte(c.Event), j.Vkeys, j.Origin); err != nil {
			fail("inclusion %d: %v", i, err)
			continue
		}
		r.InclusionOK++
		if !c.Sweep {
			continue
		}
		proof, event := []byte(c.Proof), []byte(c.Event)
		for b := 0; b < len(proof)*8; b++ {
			bad := flip(proof, b/8, b%8)
			if checkInclusion(bad, event, j.Vkeys, j.Origin) == nil {
				if bytes.Equal(canonicalProof(bad), proof) {
					r.SweepEquivalent++
				} else {
					fail("inclusion %d: proof with bit %d flipped verifies", i, b)
				}
			} else {
				r.SweepRefused++
			}
		}
		for b := 0; b < len(event)*8; b++ {
			if checkInclusion(proof, flip(event, b/8, b%8), j.Vkeys, j.Origin) == nil {
				fail("inclusion %d: event with bit %d flipped verifies", i, b)
			} else {
				r.SweepRefused++
			}
		}
	}

	for i, c := range j.Consistency {
		if err := checkConsistency(c, j.Vkeys, j.Origin); err != nil {
			fail("consistency %d: %v", i, err)
			continue
		}
		r.ConsistencyOK++
		if !c.Sweep {
			continue
		}
		for k := range c.Hashes {
			h, _ := decodeHash(c.Hashes[k])
			for b := 0; b < tlog.HashSize*8; b++ {
				bad := c
				bad.Hashes = append([]string{}, c.Hashes...)
				fh := h
				fh[b/8] ^= 1 << (b % 8)
				bad.Hashes[k] = base64.StdEncoding.EncodeToString(fh[:])
				if checkConsistency(bad, j.Vkeys, j.Origin) == nil {
					fail("consistency %d: hash %d bit %d flipped verifies", i, k, b)
				} else {
					r.SweepRefused++
				}
			}
		}
		for _, which := range []string{"old", "new"} {
			msg := []byte(c.OldNote)
			if which == "new" {
				msg = []byte(c.NewNote)
			}
			for b := 0; b < len(msg)*8; b++ {
				bad := c
				flipped := flip(msg, b/8, b%8)
				if which == "old" {
					bad.OldNote = string(flipped)
				} else {
					bad.NewNote = string(flipped)
				}
				if checkConsistency(bad, j.Vkeys, j.Origin) == nil {
					if bytes.Equal(canonicalNote(flipped), msg) {
						r.SweepEquivalent++
					} else {
						fail("consistency %d: %s note bit %d flipped verifies", i, which, b)
					}
				} else {
					r.SweepRefused++
				}
			}
		}
	}

	for i, c := range j.RefuseInclusion {
		keys, origin := j.trust(c.Vkeys, c.Origin)
		if checkInclusion([]byte(c.Proof), []byte(c.Event), keys, origin) == nil {
			fail("refuse_inclusion %d (%s): verifies", i, c.Why)
		} else {
			r.Refused++
		}
	}
	for i, c := range j.RefuseConsistency {
		keys, origin := j.trust(c.Vkeys, c.Origin)
		if checkConsistency(c, keys, origin) == nil {
			fail("refuse_consistency %d (%s): verifies", i, c.Why)
		} else {
			r.Refused++
		}
	}
	for i, msg := range j.RefuseNotes {
		if _, err := openHead([]byte(msg), j.Vkeys, j.Origin); err == nil {
			fail("refuse_notes %d: opens", i)
		} else {
			r.Refused++
		}
	}

	// Every bit of every trusted key flipped: the note must not open, or
	// the flipped key must be the same key (hex case of its hash).
	if j.KeySweepNote != "" {
		for k, key := range j.Vkeys {
			for b := 0; b < len(key)*8; b++ {
				bad := string(flip([]byte(key), b/8, b%8))
				if _, err := openHead([]byte(j.KeySweepNote), []string{bad}, j.Origin); err == nil {
					if canonicalKey(bad) == key {
						r.SweepEquivalent++
					} else {
						fail("key %d bit %d flipped opens the note", k, b)
					}
				} else {
					r.SweepRefused++
				}
			}
		}
	}

	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}
