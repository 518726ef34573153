"""Internal column names shared by the stages (one place, no string drift)."""

DOC_ID = "doc_id"
TEXT = "text"
IS_EMPTY = "is_empty"
EXACT_HASH = "exact_hash"
EXACT_REP = "exact_rep"
SHINGLES = "shingles"
BUCKET = "bucket"
BANDS = "bands"
QUERIES = "queries"  # containment mode: the keys a document looks up (BANDS are the keys it is found by)
NID = "_nid"
ADOC = "_adoc"  # nightly append: an archived document's id
DOC_A = "doc_a"
DOC_B = "doc_b"
JACCARD = "jaccard"
CONTAINMENT_A = "containment_a"
CONTAINMENT_B = "containment_b"
MATCH = "match"
SIMHASH = "simhash"  # SimHash fingerprint, bits 0-63 (match.method = "simhash")
SIMHASH_HI = "simhash_hi"  # bits 64-127 of a 128-bit SimHash
STRIPPED = "stripped"  # boilerplate segments removed from a document
TEXT_LEN = "text_len"  # characters of the raw text, as Spark's length() counts them
CLUSTER_ID = "cluster_id"
# keeper linkage, archive index: the connected component of verified pairs a document is in
COMPONENT_ID = "component_id"
IS_KEEPER = "is_keeper"
KEEPER_ID = "keeper_id"
STATUS = "status"

# Values of STATUS in clusters/.
UNIQUE = "unique"  # a cluster of one, kept
KEEPER = "keeper"  # kept; the cluster has duplicates
DUPLICATE = "duplicate"  # near-duplicate of its keeper, removed
EXACT_DUPLICATE = "exact_duplicate"  # same normalised text as its keeper, removed
EMPTY = "empty"  # null or empty after normalisation: kept, never matched

# Values of MATCH in pairs/.
MATCH_EXACT = "exact"
MATCH_NEAR = "near"

# 16-byte MD5 of the raw text: the archive index tells a re-sent document from a changed one by it.
TEXT_DIGEST = "text_digest"

# JSON Lines input: the text of a malformed line (Spark's columnNameOfCorruptRecord); never output.
CORRUPT = "_corrupt_record"

INTERNAL = frozenset(
    {DOC_ID, TEXT, IS_EMPTY, EXACT_HASH, EXACT_REP, SHINGLES, BUCKET, BANDS, NID,
     TEXT_LEN, STRIPPED, SIMHASH, SIMHASH_HI, QUERIES, CLUSTER_ID, IS_KEEPER, KEEPER_ID, STATUS}
)
