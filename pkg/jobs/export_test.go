package jobs

// Looks is how many times c's waits (Wait, Follow, Events) have looked at
// the database: tests count them to see that a wait sleeps.
func Looks(c *Client) int64 { return c.looks.Load() }
