// Package stacktest holds no code, only tests: it runs the object
// conformance suite (objecttest) and fault-injection tests over whole
// stacks of decorators, the way a mount assembles them:
//
//	retry(limit(metrics(compress(encrypt(prefix(backend))))))
//
// Compression sits outside encryption because the object layout spec
// compresses a block before it encrypts it.
package stacktest
