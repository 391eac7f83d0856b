package pgsched_test

import (
	"testing"

	"github.com/pgsched/pgsched/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
