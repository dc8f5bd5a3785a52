"""Drive `sluice gateway` with boto3, AWS's own S3 client, one phase at a
time; the Go test (gateway_test.go) checks a FUSE mount of the same
volume between the phases.

usage: gateway_boto3.py ENDPOINT ACCESS SECRET PHASE DIR

  put   makes the bucket "e2e", uploads DIR/small.bin as "dir/small.bin"
        with metadata, and DIR/big.bin as "dir/big.bin" in 5 MiB parts
  get   downloads "dir/from-mount.txt" (which the mount wrote) to
        DIR/from-mount.txt, checks ranged GETs, listings with a delimiter,
        CopyObject, a presigned GET, a wrong secret, then deletes
        "dir/small.bin"

Prints "ok PHASE" when every check passed; fails with a traceback
otherwise.
"""

import sys
import urllib.request

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError


def client(endpoint, access, secret):
    # Signature version 4 throughout: boto3 presigns with version 2 by
    # default, which versitygw (and so the gateway) does not take.
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=access,
        aws_secret_access_key=secret, region_name="us-east-1",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def put(s3, d):
    s3.create_bucket(Bucket="e2e")
    with open(d + "/small.bin", "rb") as f:
        s3.put_object(Bucket="e2e", Key="dir/small.bin", Body=f,
                      ContentType="text/x-test", Metadata={"origin": "boto3"})
    cfg = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
    s3.upload_file(d + "/big.bin", "e2e", "dir/big.bin", Config=cfg)
    head = s3.head_object(Bucket="e2e", Key="dir/big.bin")
    check(head["ETag"].endswith('-3"'), "multipart ETag " + head["ETag"])


def get(s3, d, endpoint, access):
    s3.download_file("e2e", "dir/from-mount.txt", d + "/from-mount.txt")
    body = s3.get_object(Bucket="e2e", Key="dir/from-mount.txt", Range="bytes=8-12")["Body"].read()
    check(body == b"by a ", "ranged GET: %r" % body)
    head = s3.head_object(Bucket="e2e", Key="dir/small.bin")
    check(head["ContentType"] == "text/x-test", "content type " + head["ContentType"])
    check(head["Metadata"] == {"origin": "boto3"}, "metadata %r" % head["Metadata"])

    top = s3.list_objects_v2(Bucket="e2e", Delimiter="/")
    check([p["Prefix"] for p in top.get("CommonPrefixes", [])] == ["dir/"], "prefixes %r" % top)
    check("Contents" not in top, "keys at the top %r" % top.get("Contents"))
    keys = []
    for page in s3.get_paginator("list_objects").paginate(Bucket="e2e", Prefix="dir/", PaginationConfig={"PageSize": 2}):
        keys += [o["Key"] for o in page.get("Contents", [])]
    check(keys == ["dir/big.bin", "dir/from-mount.txt", "dir/small.bin"], "keys %r" % keys)

    s3.copy_object(Bucket="e2e", Key="copied/small.bin", CopySource={"Bucket": "e2e", "Key": "dir/small.bin"})
    copied = s3.get_object(Bucket="e2e", Key="copied/small.bin")
    check(copied["Metadata"] == {"origin": "boto3"}, "copy's metadata %r" % copied["Metadata"])
    with open(d + "/small.bin", "rb") as f:
        check(copied["Body"].read() == f.read(), "copy's bytes")

    url = s3.generate_presigned_url("get_object", Params={"Bucket": "e2e", "Key": "dir/from-mount.txt"}, ExpiresIn=60)
    with urllib.request.urlopen(url) as r:
        check(r.read().startswith(b"written by a mount"), "presigned GET")

    try:
        client(endpoint, access, "wrong-secret").list_buckets()
        raise AssertionError("a wrong secret was let in")
    except ClientError as e:
        check(e.response["Error"]["Code"] == "SignatureDoesNotMatch", "wrong secret: %r" % e.response["Error"])

    s3.delete_object(Bucket="e2e", Key="dir/small.bin")


def main():
    endpoint, access, secret, phase, d = sys.argv[1:6]
    s3 = client(endpoint, access, secret)
    if phase == "put":
        put(s3, d)
    elif phase == "get":
        get(s3, d, endpoint, access)
    else:
        raise SystemExit("unknown phase " + phase)
    print("ok", phase)


if __name__ == "__main__":
    main()
