package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/minio/minio-go/v7"

	"github.com/sluicefs/sluice/internal/object"
)

// Error classes a Store's errors may wrap, checked with errors.Is.
var (
	// ErrBucketNotFound reports that the bucket does not exist.
	ErrBucketNotFound = errors.New("bucket does not exist")
	// ErrAccessDenied reports that the service refused the credentials or
	// the request.
	ErrAccessDenied = errors.New("access denied")
	// ErrUnreachable reports that no connection to the endpoint could be
	// made.
	ErrUnreachable = errors.New("endpoint unreachable")
)

// classify wraps an error of operation op on key (empty for bucket
// operations) in one line naming the bucket URL, marked with
// object.ErrNotFound or one of this package's error classes when it is one.
func (s *Store) classify(op, key string, err error) error {
	what := op
	if key != "" {
		what = fmt.Sprintf("%s %q", op, key)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %s: %w", s, what, err)
	}
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "NoSuchKey":
		return fmt.Errorf("%s: %s: %w", s, what, object.ErrNotFound)
	case "NoSuchBucket":
		return fmt.Errorf("%s: %s: %w (create it with `sluice format`, or check the bucket name)", s, what, ErrBucketNotFound)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken",
		"XAdminUserNotFound": // versitygw's answer (HTTP 404) to an unknown access key
		return fmt.Errorf("%s: %s: %w (%s: check the access key, secret key and session token)", s, what, ErrAccessDenied, resp.Code)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && (resp.Code == "" || resp.Code == "NotFound"):
		// A HEAD response has no body, hence no code.
		if key == "" {
			return fmt.Errorf("%s: %s: %w", s, what, ErrBucketNotFound)
		}
		return fmt.Errorf("%s: %s: %w", s, what, object.ErrNotFound)
	case resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: %s: %w (HTTP 403 %s: check the access key, secret key and session token)", s, what, ErrAccessDenied, resp.Code)
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests ||
		resp.Code == "SlowDown" || resp.Code == "RequestTimeout":
		// Throttling and server errors: the retry decorator tries again.
		return fmt.Errorf("%s: %s: %w: %w", s, what, object.ErrTransient, err)
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%s: %s: %w: %w", s, what, ErrUnreachable, unwrapURLError(err))
	}
	return fmt.Errorf("%s: %s: %w", s, what, err)
}

// unwrapURLError drops the request URL and method from an HTTP client error:
// the Store's URL already names the endpoint.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
