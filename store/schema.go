package store

import (
	"bytes"
	"encoding/binary"
	"strings"
	"time"
)

// Buckets. Every name the file uses is declared here; Open creates any that
// are missing, so a new bucket needs only a line in allBuckets (a change to
// stored data needs a migration, see migrate.go).
var (
	// bucketMeta: keySchemaVersion -> uint64 (big-endian).
	bucketMeta = []byte("meta")

	// bucketOrgs: org id -> orgRecord JSON.
	bucketOrgs = []byte("orgs")
	// bucketOrgsByName: lower(name) -> org id.
	bucketOrgsByName = []byte("orgs_by_name")

	// bucketKeys: key id -> keyRecord JSON.
	bucketKeys = []byte("api_keys")
	// bucketKeysByHash: sha256(secret) (32 bytes) -> key id.
	bucketKeysByHash = []byte("api_keys_by_hash")
	// bucketKeysByOrg: orgTimeIDKey(org id, created_at, key id) -> empty.
	bucketKeysByOrg = []byte("api_keys_by_org")

	// bucketDomains: domain id -> domainRecord JSON.
	bucketDomains = []byte("domains")
	// bucketDomainsByOrg: orgTimeIDKey(org id, created_at, domain id) -> empty.
	bucketDomainsByOrg = []byte("domains_by_org")
	// bucketDomainsByName: domainNameKey(org id, name) -> domain id.
	bucketDomainsByName = []byte("domains_by_name")
	// bucketDomainsByEmail: emailKey(reporting email) -> domain id.
	bucketDomainsByEmail = []byte("domains_by_email")
)

// allBuckets lists every top-level bucket Open makes sure exists.
var allBuckets = [][]byte{
	bucketMeta,
	bucketOrgs, bucketOrgsByName,
	bucketKeys, bucketKeysByHash, bucketKeysByOrg,
	bucketDomains, bucketDomainsByOrg, bucketDomainsByName, bucketDomainsByEmail,
}

// keySchemaVersion is the key in bucketMeta holding the schema version.
var keySchemaVersion = []byte("schema_version")

// idLen is the length of an id in text form; ids are stored as text.
const idLen = 36

// idKey is the key of an entity in its primary bucket.
func idKey(id string) []byte { return []byte(id) }

// orgNameKey makes organization names unique regardless of case.
func orgNameKey(name string) []byte { return []byte(strings.ToLower(name)) }

// orgPrefix is the prefix shared by every per-organization index key. Ids
// have a fixed length, so no separator is needed.
func orgPrefix(orgID string) []byte { return []byte(orgID) }

// orgTimeIDKey is org id | created_at (big-endian Unix nanoseconds) | id, so
// that a prefix scan over one organization runs in creation order, ties broken
// by the time-ordered id.
func orgTimeIDKey(orgID string, t time.Time, id string) []byte {
	k := make([]byte, 0, idLen+8+idLen)
	k = append(k, orgID...)
	k = binary.BigEndian.AppendUint64(k, timeKey(t))
	return append(k, id...)
}

// idFromOrgTimeIDKey returns the id at the end of an orgTimeIDKey.
func idFromOrgTimeIDKey(k []byte) string {
	if len(k) < idLen {
		return ""
	}
	return string(k[len(k)-idLen:])
}

// timeKey clamps times before 1970 to zero so they still sort first.
func timeKey(t time.Time) uint64 {
	n := t.UnixNano()
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// domainNameKey is org id | domain name: names are unique per organization.
func domainNameKey(orgID, name string) []byte {
	return append(orgPrefix(orgID), name...)
}

// emailKey makes reporting addresses unique regardless of case.
func emailKey(addr string) []byte { return []byte(strings.ToLower(addr)) }

// versionValue encodes a schema version.
func versionValue(v int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// prefixEnd returns the smallest key greater than every key with prefix, or
// nil when there is none (prefix all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
