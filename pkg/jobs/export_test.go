package jobs

import (
	"context"

	"github.com/agentjobs/jobs/internal/protocol"
)

// Looks is how many times c's waits (Wait, Follow, Events) have looked at
// the database: tests count them to see that a wait sleeps.
func Looks(c *Client) int64 { return c.looks.Load() }

// SocketPath is the socket of the supervisor c talks to ("" before c has
// reached one).
func SocketPath(c *Client) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return ""
	}
	return c.conn.SocketPath()
}

// UseSocket has c reach its supervisor through the socket at path (a
// proxy a test controls).
func UseSocket(ctx context.Context, c *Client, path string) error {
	conn, err := protocol.Dial(ctx, path)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close()
	}
	c.conn = conn
	return nil
}
