"""How a version's DVs are shared out among Spark tasks (`iceberg/delete_files.by_dv_file`): pure."""

from __future__ import annotations

import uuid

from dv_assets.mirror.iceberg.delete_files import by_dv_file
from testkit.synthetic import z85_encode
from tests.helpers.dvs import dv_task


def test_a_large_dv_file_is_cut_into_offset_ranges_each_dv_in_one_share() -> None:
    big, small = uuid.uuid4(), uuid.uuid4()
    # Offsets out of order, as a commit may list them.
    tasks = [dv_task(big, 1 + 18 * i, i) for i in (6, 0, 9, 3, 1, 8, 2, 7, 5, 4)] + [dv_task(small, 1, 0)]
    shares = by_dv_file(tasks, max_share=4)
    assert sorted(t.data_file for share in shares for t in share) == sorted(t.data_file for t in tasks)
    assert [len(s) for s in shares] == [4, 4, 2, 1]
    big_shares = [s for s in shares if s[0].path_or_inline_dv == z85_encode(big.bytes)]
    offsets = [[t.offset for t in s] for s in big_shares]
    # Consecutive, ascending ranges of the file: each byte is read by one share.
    assert sorted(o for share in offsets for o in share) == [1 + 18 * i for i in range(10)]
    for share in offsets:
        assert share == sorted(share)
    assert sorted(offsets)[0][-1] < sorted(offsets)[1][0]


def test_without_a_bound_a_dv_file_is_one_share() -> None:
    dv_file = uuid.uuid4()
    tasks = [dv_task(dv_file, 1 + 18 * i, i) for i in range(10)]
    assert [len(s) for s in by_dv_file(tasks)] == [10]
