//go:build !nomcp

package main

import _ "github.com/modelcontextprotocol/go-sdk/mcp"
