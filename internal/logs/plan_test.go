package logs

import (
	"strings"
	"testing"
)

// TestQueryPlans checks that the reads seek by index and never sort: the
// cost of a page must not grow with the log.
func TestQueryPlans(t *testing.T) {
	d := openDB(t)
	queries := map[string][]any{
		`SELECT byte_offset FROM chunks WHERE job_id = ? AND first_line < ?
		ORDER BY first_line DESC, rowid DESC LIMIT 1`: {"j", 5},
		`SELECT stream FROM chunks WHERE job_id = ?1 AND byte_offset >= coalesce((SELECT byte_offset FROM chunks
			WHERE job_id = ?1 AND byte_offset <= ?2 ORDER BY byte_offset DESC LIMIT 1), 0)
		ORDER BY byte_offset`: {"j", 5},
		`SELECT stream FROM chunks WHERE job_id = ?1 ORDER BY byte_offset DESC`:                                   {"j"},
		`SELECT byte_offset, length(data) FROM chunks WHERE job_id = ? AND byte_offset >= ? ORDER BY byte_offset`: {"j", 5},
	}
	for q, args := range queries {
		rows, err := d.Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		all := strings.Join(plan, "; ")
		if strings.Contains(all, "TEMP B-TREE") || strings.Contains(all, "SCAN chunks") && !strings.Contains(all, "USING") {
			t.Errorf("query sorts or scans: %s\n%s", all, q)
		}
		t.Log(all)
	}
}
