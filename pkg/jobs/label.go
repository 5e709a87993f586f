package jobs

import (
	"context"
	"fmt"
)

// SetLabel changes job ref's label, running or finished; the job's events
// record the change. A front end that groups jobs by label (a session)
// moves a job from one group to another with it.
func (c *Client) SetLabel(ctx context.Context, ref, label string) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	if err := c.writable(); err != nil {
		return err
	}
	if err := checkText("label", label, MaxLabelBytes); err != nil {
		return fmt.Errorf("set label: %w", err)
	}
	j, err := c.find(ctx, ref)
	if err != nil {
		return err
	}
	if err := c.db.SetLabel(ctx, j.ID, label); err != nil {
		return publicErr(ref, err)
	}
	return nil
}
