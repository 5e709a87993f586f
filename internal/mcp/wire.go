package mcp

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// codeResourceNotFound is the error code the MCP specification gives a
// read or subscription of a resource that does not exist. The SDK answers
// invalid params (-32602) since its 1.7; clients written to the
// specification look for -32002.
const codeResourceNotFound = -32002

// loggingLevels are the levels logging/setLevel takes (RFC 5424's, as the
// specification lists them).
var loggingLevels = map[string]bool{
	"debug": true, "info": true, "notice": true, "warning": true,
	"error": true, "critical": true, "alert": true, "emergency": true,
}

// wireErrors is a receiving middleware that answers as the specification
// says where the SDK does not: an unknown logging level is refused with
// invalid params (the SDK stores any string, and then sends nothing), and
// a resource that does not exist is -32002.
func wireErrors(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method == "logging/setLevel" {
			//lint:ignore SA1019 logging is deprecated in a protocol revision newer than the clients served; it works, and must refuse what it cannot take
			if p, ok := req.GetParams().(*sdk.SetLoggingLevelParams); ok && !loggingLevels[string(p.Level)] {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
					Message: fmt.Sprintf("unknown logging level %q: one of debug, info, notice, warning, error, critical, alert, emergency", p.Level)}
			}
		}
		res, err := next(ctx, method, req)
		var je *jsonrpc.Error
		// sdk.ResourceNotFoundError's code is invalid params now; its
		// message tells it from other invalid params.
		if (method == "resources/read" || method == "resources/subscribe") && errors.As(err, &je) &&
			je.Code == jsonrpc.CodeInvalidParams && je.Message == "Resource not found" {
			return res, &jsonrpc.Error{Code: codeResourceNotFound, Message: je.Message, Data: je.Data}
		}
		return res, err
	}
}
