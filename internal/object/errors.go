package object

import "errors"

// ErrTransient marks an error that may go away if the same request is made
// again: a throttled request (HTTP 503 SlowDown), a server error (5xx), a
// dropped connection. Backends wrap it into the errors they classify as
// transient (fmt.Errorf("...: %w", object.ErrTransient) or with
// errors.Join); the retry decorator retries them. Errors that do not wrap
// it may still be retried when they report themselves as timeouts or
// temporary, as network errors do.
var ErrTransient = errors.New("transient object storage error")
