"""The 29 rows of workflow-trial-4 (../shared/reviews/workflow-trial-4.md) as
tool tests (issue 22, item 6), on the synthetic base of tests/fork_fixture.py.

Each row and the test that holds it to the outcome the report calls OK, or to
the fixed one (tests/ omitted from the paths):

====  ==========================================================================
row   test
====  ==========================================================================
1     test_trial_rows.py::test_row_1_a_patch_split_in_two_round_trips
2     test_trial_rows.py::test_row_2_every_kind_of_change_round_trips_byte_exact
3     test_trial_rows.py::test_row_3_a_non_ascii_author_and_message_round_trip;
      test_advice.py::test_sign_off_advice_never_signs_someone_elses_commit;
      test_messages.py::test_a_non_ascii_subject_changed_on_both_sides_gets_the_fixup_advice
4a    test_trial_rows.py::test_row_4a_a_hand_reordered_series_is_synced_and_renumbered;
      test_trial_rows.py::test_row_4a_a_hand_reorder_and_local_work_both_survive_the_advice;
      test_advice.py::test_a_renumbered_patch_is_reported_as_renumbered
4b    test_advice.py::test_a_hand_renamed_patch_is_reported_as_renamed
5     test_teammates.py::test_local_work_and_a_teammate_change_both_survive_the_advice
5b    test_teammates.py::test_both_sides_changed_one_patch_the_advice_keeps_both_in_it
5c    test_advice.py::test_a_reworded_subject_and_a_code_change_end_in_one_patch
6     test_fork.py::test_sync_refuses_uncommitted_changes;
      test_advice.py::test_the_uncommitted_changes_refusal_gives_a_stash_that_takes_untracked_files
7a    test_kill.py::test_killed_at_any_git_command_nothing_is_lost (sync --force);
      test_interrupted.py::test_a_sync_stopped_in_git_am_leaves_the_fork_as_it_was
7b    test_trial_rows_clone.py::test_row_7b_a_truncated_cached_sdist_is_refused_then_fetched_again;
      test_fork.py::test_sha256_mismatch_is_refused_and_nothing_is_extracted;
      test_tool_errors.py::test_sha256_mismatch_says_which_side_is_wrong
7c    test_kill.py::test_killed_at_any_git_command_nothing_is_lost (first sync:
      nothing left in build/); test_interrupted.py::test_a_first_sync_stopped_in_git_am_leaves_no_fork
8     test_kill.py::test_two_commands_at_once
9     test_trial_rows_clone.py::test_row_9_each_git_worktree_has_its_own_fork
10a   test_trial_rows_clone.py::test_row_10a_run_by_path_from_inside_the_fork_uses_the_clones_paths;
      test_tool_errors.py::test_the_tool_runs_by_its_path_from_any_folder
10b   test_cache_and_backups.py::test_a_relative_cache_is_the_clones_root_from_any_folder
E1    test_advice.py::test_sign_off_advice_never_signs_someone_elses_commit;
      test_messages.py::test_a_subject_without_its_area_says_how_git_am_keeps_it
E2    test_advice.py::test_a_fixup_commit_is_refused_and_the_advice_squashes_it
E3    test_trial_rows_hand_edits.py::test_row_e3_a_subject_reworded_by_a_teammate_updates_the_fork
E4    test_advice.py::test_a_fork_off_its_branch_is_named_and_the_advice_goes_back
E5    test_messages.py::test_a_separator_line_is_refused_and_the_advice_keeps_the_whole_message
E6    test_messages.py::test_each_line_git_am_misreads_is_named_and_the_proof_catches_it_too;
      test_fork_safety.py::test_a_commit_message_that_git_am_reads_as_a_diff_is_not_exported
E7    test_trial_rows_hand_edits.py::test_row_e7_a_hand_edited_plus_line_is_named_and_recovered;
      test_fork_safety.py::test_a_patch_whose_hunk_header_counts_too_few_lines_is_refused
E8    test_advice.py::test_conflict_markers_in_the_series_are_named_as_an_unresolved_merge
E9    test_trial_rows_hand_edits.py::test_row_e9_a_hand_edited_message_line_is_named_then_synced
E10   test_fork.py::test_sync_refuses_unexported_commits_and_force_keeps_them
E11   test_cache_and_backups.py::test_the_backup_a_teammates_change_leaves_is_pruned;
      test_cache_and_backups.py::test_a_backup_holding_unexported_work_is_kept
E12   test_trial_rows_clone.py::test_row_e12_the_tools_git_commands_start_no_gc
E13   test_cache_and_backups.py::test_cache_lists_each_path_once_and_only_what_is_there
====  ==========================================================================
"""  # noqa: E501

from __future__ import annotations

import os
import random
from pathlib import Path

from fork_fixture import (
    THREE,
    commit,
    commit_series,
    edit_series,
    follow,
    fresh_clone,
    head,
    head_of,
    refusal,
    series_of,
    subjects,
    sync,
    teammate,
    trees,
)

from forktool.export import export
from forktool.git import git
from forktool.series import read_series

ZOE = "Zoë Ångström <zoe@example.invalid>"


def swap_second_and_third(patches: Path) -> None:
    series = patches / "series"
    lines = series.read_text().splitlines()
    names = [i for i, line in enumerate(lines) if line.endswith(".patch")]
    lines[names[1]], lines[names[2]] = lines[names[2]], lines[names[1]]
    series.write_text("\n".join(lines) + "\n")


def test_row_1_a_patch_split_in_two_round_trips(workspace):
    _, patches, tree = workspace
    sync(workspace)
    commit(tree, *THREE[0])
    (tree / "mini/util.py").write_text("def double(x):\n    return x * 2\n")
    (tree / "tests/test_util.py").parent.mkdir()
    (tree / "tests/test_util.py").write_text("assert True\n")
    git(tree, "add", "mini", "tests")
    git(tree, "commit", "-qsm", "[Core] Code and its test")
    commit(tree, *THREE[2])
    export(tree, patches)
    commit_series(patches)
    old = teammate(workspace)  # a clone with the fork of before the split
    # rebase -i (edit 2); reset HEAD^; one commit per folder; --continue.
    edit_series(tree, "sed -i 2s/^pick/edit/")
    git(tree, "reset", "-q", "HEAD^")
    git(tree, "add", "mini")
    git(tree, "commit", "-qsm", "[Core] Code")
    git(tree, "add", "tests")
    git(tree, "commit", "-qsm", "[Test] Its test")
    git(tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})
    message = export(tree, patches)
    print(message)
    assert "exported 4 patches" in message
    assert "0002-Core-Code-and-its-test.patch: removed from the series" in message
    assert "0003-Core-Third.patch -> 0004-Core-Third.patch: renumbered" in message
    commit_series(patches)
    assert [p.name for p in read_series(patches)] == [
        "0001-Core-First.patch",
        "0002-Core-Code.patch",
        "0003-Test-Its-test.patch",
        "0004-Core-Third.patch",
    ]
    other = fresh_clone(workspace)
    assert trees(other) == trees(tree) and len(trees(tree)) == 5
    assert subjects(other) == subjects(tree)
    message = sync(workspace, tree=old)  # the teammate pulls
    print(message)
    assert "0002-Core-Code-and-its-test.patch: dropped from the series" in message
    assert "0003-Test-Its-test.patch: only in the series" in message
    assert trees(old) == trees(tree)


def test_row_2_every_kind_of_change_round_trips_byte_exact(workspace):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    rng = random.Random(22)
    blobs = {
        "mini/logo.png": b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + rng.randbytes(300),
        "mini/data.npy": rng.randbytes(2048),
        "mini/nul.bin": b"text\0with\0NULs\n" * 8,
    }
    for path, data in blobs.items():
        (tree / path).write_bytes(data)
    (tree / "mini/run.sh").write_text("#!/bin/sh\necho run\n")
    (tree / "mini/run.sh").chmod(0o755)
    (tree / "mini/__init__.py").chmod(0o755)
    git(tree, "rm", "-q", "mini/rocm_hip.py")
    (tree / "mini/tools").mkdir()
    git(tree, "mv", "mini/util.py", "mini/tools/util.py")
    git(tree, "add", "-A")
    git(tree, "commit", "-qsm", "[Core] Every kind of change")
    assert "2 patches" in export(tree, patches)
    text = (patches / "0002-Core-Every-kind-of-change.patch").read_text()
    assert text.count("GIT binary patch") == 3
    assert "deleted file mode 100644" in text and "new file mode 100755" in text
    assert "rename from mini/util.py\nrename to mini/tools/util.py" in text
    assert "old mode 100644\nnew mode 100755" in text
    commit_series(patches)
    other = fresh_clone(workspace)
    assert trees(other) == trees(tree)
    for path, data in blobs.items():
        assert (other / path).read_bytes() == data
    for path in ("mini/run.sh", "mini/__init__.py"):
        assert os.access(other / path, os.X_OK), path
    assert not os.access(other / "mini/tools/util.py", os.X_OK)
    assert not (other / "mini/rocm_hip.py").exists()
    assert not (other / "mini/util.py").exists()
    assert "is what export writes (2 patches)" in export(other, patches, check=True)


def test_row_3_a_non_ascii_author_and_message_round_trip(workspace):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    subject = "[Doc] Ångström grade naïve façade: document KV cache zeroing "
    subject += "x" * (120 - len(subject))
    body = f"{subject}\n\n说明：零化 🚀 ✓\n\nSigned-off-by: {ZOE}\n"
    (tree / "DOC.md").write_text("Ångström 🚀\n")
    git(tree, "add", "DOC.md")
    name, email = ZOE[: ZOE.index(" <")], ZOE[ZOE.index("<") + 1 : -1]
    git(tree, "commit", "-q", "-F", "-", input=body,
             env={"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email})  # fmt: skip
    export(tree, patches)
    commit_series(patches)
    (written,) = [p for p in read_series(patches) if p.name.startswith("0002-")]
    assert written.name.isascii() and written.name.startswith("0002-Doc-ngstr-m-")
    other = fresh_clone(workspace)
    shown = ["log", "-1", "--format=%an <%ae>%n%B"]
    assert git(other, *shown).stdout == git(tree, *shown).stdout
    assert git(other, *shown).stdout == f"{ZOE}\n{body}\n"
    assert trees(other) == trees(tree)
    assert "is what export writes (2 patches)" in export(other, patches, check=True)


def test_row_4a_a_hand_reordered_series_is_synced_and_renumbered(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    old_head = head(tree)
    swap_second_and_third(patches)
    message = sync(workspace)
    print(message)
    assert "reordered in the series" in message
    assert subjects(tree) == ["[Core] First", "[Core] Third", "[Core] Second"]
    backup = message.rsplit("branch ", 1)[1].rstrip(".")
    assert head_of(tree, backup) == old_head
    refusal(lambda: export(tree, patches, check=True))  # the numbers are stale
    message = export(tree, patches)
    print(message)
    assert "0003-Core-Third.patch -> 0002-Core-Third.patch: renumbered" in message
    assert "removed from the series" not in message
    assert "is what export writes (3 patches)" in export(tree, patches, check=True)


def test_row_4a_a_hand_reorder_and_local_work_both_survive_the_advice(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    swap_second_and_third(patches)
    commit(tree, "mini/local.py", "LOCAL = 1\n", "[Doc] Local")
    error = refusal(lambda: sync(workspace))
    message = str(error)
    assert error.status == 3
    assert "0004-Doc-Local.patch: only in the fork" in message
    assert "(order): reordered in the series" in message
    follow(workspace, message)
    assert subjects(tree) == ["[Core] First", "[Core] Third", "[Core] Second",
                              "[Doc] Local"]  # fmt: skip
    assert [p.name for p in read_series(patches)] == [
        "0001-Core-First.patch",
        "0002-Core-Third.patch",
        "0003-Core-Second.patch",
        "0004-Doc-Local.patch",
    ]
    assert "is what export writes (4 patches)" in export(tree, patches, check=True)
