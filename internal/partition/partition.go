// Package partition maps an ordering_id to its logical partition exactly as
// the SQL function pgsched.partition_of does: the first four bytes of the MD5
// of its UTF-8 bytes, read as a big-endian unsigned integer, modulo the
// partition count. MD5 is used for spread and because PostgreSQL has it
// built in, not for security.
package partition

import (
	"crypto/md5"
	"encoding/binary"
)

// Of returns the partition of orderingID among count partitions (count > 0).
func Of(orderingID string, count int) int {
	sum := md5.Sum([]byte(orderingID))
	return int(binary.BigEndian.Uint32(sum[:4]) % uint32(count))
}
