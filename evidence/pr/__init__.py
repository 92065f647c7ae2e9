"""python3 -m forktool pr: the upstream pull request kit, in build/pr/.

    title.txt          the PR's title
    description.md     vLLM's .github/PULL_REQUEST_TEMPLATE.md from the fork tree,
                       filled with the prose of pr/description.toml and the
                       numbers of build/results/ (written by `setup` and `test`)
    series/            git format-patch --cover-letter base..HEAD; the cover
                       letter's body is the description as plain text
    apply-to-vllm.sh   run in a clone of vllm-project/vllm: `git am -3` of
                       each patch on a new branch at any ref, saying how
                       each applied or where it stopped
    preimages.pack     the blobs the patches were made against, which
                       `git am -3` merges from

Numbers come only from results measured on the fork's current tree with the
current content of the inputs their check reads (forktool.checks.inputs_id,
Check.reads); a missing or stale result of a check that gates `test`
stops the command before it writes anything, unless `--allow-partial`.
`make` loads the inputs; `sections` and `description` render, `kit`
writes, `lint` checks the description.
"""
