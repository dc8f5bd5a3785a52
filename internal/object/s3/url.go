package s3

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// DefaultRegion is the region used when neither the bucket URL's host nor
// its ?region= query names one.
const DefaultRegion = "us-east-1"

// ParseURL reads a bucket URL into a Config. Accepted forms:
//
//	http(s)://HOST[:PORT]/BUCKET          path-style (MinIO, Ceph RGW, versitygw, ...)
//	https://BUCKET.s3.REGION.amazonaws.com virtual-host style, region from the host
//	https://BUCKET.s3.amazonaws.com        virtual-host style, us-east-1
//	https://BUCKET.HOST[:PORT]             virtual-host style on any other host
//
// A URL without a scheme is taken as https. The query may set ?region=;
// otherwise the region comes from an AWS host name, or is DefaultRegion.
// Credentials in the URL (http://ACCESS:SECRET@HOST/BUCKET) fill AccessKey
// and SecretKey; the other fields keep their zero values (see Defaults).
func ParseURL(raw string) (Config, error) {
	var c Config
	if raw == "" {
		return c, errors.New("empty bucket URL")
	}
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return c, fmt.Errorf("bad bucket URL: %w", redactURLError(err))
	}
	switch u.Scheme {
	case "http":
	case "https":
		c.Secure = true
	default:
		return c, fmt.Errorf("bad bucket URL scheme %q: use http:// or https://", u.Scheme)
	}
	if u.Host == "" {
		return c, errors.New("bad bucket URL: no host")
	}
	if u.User != nil {
		c.AccessKey = u.User.Username()
		c.SecretKey, _ = u.User.Password()
	}
	for k := range u.Query() {
		if k != "region" {
			return c, fmt.Errorf("bad bucket URL: unknown query parameter %q (only region is known)", k)
		}
	}
	c.Region = u.Query().Get("region")

	path := strings.Trim(u.Path, "/")
	switch {
	case strings.Contains(path, "/"):
		return c, fmt.Errorf("bad bucket URL path %q: want /BUCKET (a volume's objects already live under its name)", u.Path)
	case path != "":
		c.Endpoint, c.Bucket = u.Host, path
	default:
		c.VirtualHost = true
		if c.Bucket, c.Endpoint, err = splitVirtualHost(u.Host); err != nil {
			return c, err
		}
	}
	if c.Region == "" {
		c.Region = awsRegion(u.Hostname())
	}
	return c, nil
}

// redactURLError drops the URL (which may hold a secret) from a url.Parse
// error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// splitVirtualHost splits "BUCKET.HOST[:PORT]" into the bucket and the
// endpoint. On AWS hosts the bucket is everything before the "s3" label, so
// that bucket names with dots work; elsewhere it is the first label.
func splitVirtualHost(hostport string) (bucket, endpoint string, err error) {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if net.ParseIP(strings.Trim(host, "[]")) != nil {
		return "", "", fmt.Errorf("bad bucket URL: no bucket in %q (use http://%s/BUCKET)", hostport, hostport)
	}
	labels := strings.Split(hostport, ".")
	cut := 1
	if isAWS(host) {
		for i, l := range labels {
			if i > 0 && (l == "s3" || strings.HasPrefix(l, "s3-")) {
				cut = i
				break
			}
		}
	}
	if len(labels) < 2 || cut >= len(labels) {
		return "", "", fmt.Errorf("bad bucket URL: no bucket in %q (use https://BUCKET.HOST or http://HOST/BUCKET)", hostport)
	}
	return strings.Join(labels[:cut], "."), strings.Join(labels[cut:], "."), nil
}

// isAWS reports whether host belongs to Amazon S3.
func isAWS(host string) bool {
	return strings.HasSuffix(host, ".amazonaws.com") || strings.HasSuffix(host, ".amazonaws.com.cn")
}

// awsRegion returns the region named in an AWS S3 host name, such as
// us-west-2 in s3.us-west-2.amazonaws.com or s3-us-west-2.amazonaws.com,
// and DefaultRegion for any other host.
func awsRegion(host string) string {
	if !isAWS(host) {
		return DefaultRegion
	}
	labels := strings.Split(host, ".")
	for i, l := range labels {
		if r, ok := strings.CutPrefix(l, "s3-"); ok && r != "external-1" {
			return r
		}
		if l != "s3" {
			continue
		}
		for _, next := range labels[i+1:] {
			switch next {
			case "dualstack", "accelerate", "fips":
				continue
			case "amazonaws":
				return DefaultRegion
			}
			return next
		}
	}
	return DefaultRegion
}
