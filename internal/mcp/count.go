package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// count is a whole-number argument (offset, limit, yieldMs …). It decodes
// itself so that a number out of range reads "number too large" rather
// than the JSON decoder's account of Go types.
type count int64

// UnmarshalJSON accepts a JSON number that is a whole number within int64.
func (c *count) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*c = count(n)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	var ne *strconv.NumError
	switch {
	case errors.As(err, &ne) && ne.Err == strconv.ErrRange, err == nil && math.Abs(f) >= math.MaxInt64:
		return fmt.Errorf("number too large: %s (at most %d)", cut(b), int64(math.MaxInt64))
	case err != nil:
		return fmt.Errorf("not a number: %s", cut(b))
	case f != math.Trunc(f):
		return fmt.Errorf("not a whole number: %s", cut(b))
	}
	*c = count(f)
	return nil
}

// MarshalJSON writes the number.
func (c count) MarshalJSON() ([]byte, error) { return json.Marshal(int64(c)) }

// cut keeps an echoed argument short.
func cut(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
