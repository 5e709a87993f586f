// Package logs stores and reads the output of jobs as chunk rows in the jobs
// database.
//
// # Writing
//
// A supervisor owns one [Appender]. Its runner goroutines call
// [Appender.Write] with whatever they read from a child's pipes; the appender
// copies the bytes, coalesces consecutive writes of one stream into chunks of
// at most MaxChunk bytes (a chunk never mixes streams) and a flusher
// goroutine writes the chunks of every tracked job in one IMMEDIATE
// transaction, either at the next point of a grid of FlushInterval
// ([Appender.NextFlush]) after the first unwritten byte or as soon as
// MaxBatchBytes are waiting; under a flood one transaction goes on taking
// batches for up to 200 ms, so the database sees few large transactions. The same transaction
// enforces the output cap and advances the jobs row (output_bytes,
// output_lines, last_output_at, dropped_bytes): at once for drops, else at
// most every RowEvery while the job prints; readers take a running job's
// end from its newest chunk, which is never behind. This package owns the
// chunks table only: the statements on the jobs row are package db's
// (db.AdvanceOutputs and the others of its output.go), run in the
// appender's transaction, and so is the WAL's upkeep (db.Upkeep), which
// the appender calls before and after each transaction.
//
// Memory is bounded: Write blocks while MaxPendingBytes are waiting for the
// database, so a child that floods its pipe is slowed to the database's pace.
// A database locked by another process loses nothing and does not slow the
// children: a flush that cannot take the lock within BusyTimeout goes to a
// spool file beside the database, later output follows it, and the spool is
// committed in order once the lock is free (spool.go). A database that
// cannot take writes for another reason (a full disk) never hangs a child
// either: a failing flush is retried for RetryFor, then its bytes are
// dropped, counted in jobs.dropped_bytes once the database takes writes
// again, and reported to OnDropped. Offsets keep advancing over dropped bytes, so later chunks stay
// at their true absolute offsets.
//
// # Offsets, lines and the output cap
//
// byte_offset is the absolute offset of a chunk in the job's combined output
// (all streams, in arrival order); a byte's offset never changes (eviction
// that cuts the front of a chunk moves the chunk's offset with it). first_line is the number
// of newlines before the chunk, so line numbers in this package are 0-based:
// line k is the text after the k-th newline; front ends that show 1-based
// numbers (like sed -n) subtract one. TotalLines counts newlines; a final
// unterminated line is returned by reads but not counted.
//
// With a cap (jobs.max_output > 0) the appender keeps the first HeadKeep bytes
// (at most half the cap) and the newest rest, deleting whole chunks from the
// middle, and the front of the next one so that exactly the excess goes, and
// adding them to evicted_bytes. The newest chunk is never evicted,
// so a job retains at most its cap plus one chunk. [Clear] deletes every chunk
// and counts it as evicted.
//
// # Reading
//
// Reads never need the appender or the supervisor: [ReadRange], [ReadLines],
// [Tail] and [TailLines] run one read transaction, seek by index
// (chunks_offset for bytes, chunks_line for lines) and cost the same at the
// start or the end of a large log. Every read is bounded (DefaultLimit when
// no limit is given, MaxLimit at most, ScanLimit bytes examined by a filtered
// read) and its [Page] says what it covered, where to continue, the totals and
// how many bytes inside the covered range are not stored (evicted, cleared or
// dropped).
package logs
