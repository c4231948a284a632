#!/usr/bin/env python3
"""Checks that every code block of README.md and docs/*.md is compiled or run by a test.

A `cpp` or `sql` block must appear, line for line (indentation and blank lines aside; its
#include lines anywhere in the file), in a source under tests/, examples/ or src/ (tests/queue/docs_examples_test.cpp and tests/sql/docs_test.cpp
hold the pages' blocks and run them). A `sh` block may only run the repository's own scripts
(each command names an executable file of the repository), the pgqueue command, or psql. A `text` block is output, not
code. A block without a language fails: say which it is.
Usage: code_blocks.py SOURCE_ROOT
"""
import os
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
pages = [root / 'README.md', *sorted((root / 'docs').glob('*.md'))]


def normalized(lines):
    return [line.strip() for line in lines if line.strip()]


sources = {}
for folder in ('tests', 'examples', 'src'):
    for path in (root / folder).rglob('*'):
        if path.suffix in ('.cpp', '.hpp', '.sql') and path.is_file():
            sources[path] = normalized(path.read_text(errors='replace').splitlines())


def found_in_sources(block):
    # A block's #include lines may sit with the source's other includes.
    includes = [line for line in block if line.startswith('#include')]
    code = [line for line in block if not line.startswith('#include')]
    n = len(code)
    for path, lines in sources.items():
        if not all(line in lines for line in includes):
            continue
        for i in range(len(lines) - n + 1):
            if lines[i:i + n] == code:
                return path
    return None


def shell_problem(block):
    for line in block:
        command = line.split('#', 1)[0].strip()
        if not command:
            continue
        program = command.split()[0]
        # psql, and the project's own command (cli/, run by tests/cli as a user runs it).
        if program in ('psql', 'pgqueue'):
            continue
        path = root / program
        if not (path.is_file() and os.access(path, os.X_OK)):
            return f'runs {program!r}, which is not an executable of the repository'
    return None


failures = []
blocks = 0
for page in pages:
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r'^```(\S*)\s*$', lines[i])
        if not opening:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith('```')), None)
        if end is None:
            failures.append(f'{page.relative_to(root)}:{i + 1}: block never closed')
            break
        language, body = opening.group(1), lines[i + 1:end]
        where = f'{page.relative_to(root)}:{i + 1}'
        blocks += 1
        if language in ('cpp', 'sql'):
            if not found_in_sources(normalized(body)):
                failures.append(f'{where}: this {language} block is in no test or example source')
        elif language == 'sh':
            problem = shell_problem(body)
            if problem:
                failures.append(f'{where}: {problem}')
        elif language != 'text':
            failures.append(f'{where}: a block needs a language (cpp, sql, sh, or text for output)')
        i = end + 1

for failure in failures:
    print(failure)
print(f'{blocks} code blocks in {len(pages)} pages, {len(failures)} not covered')
sys.exit(1 if failures or blocks == 0 else 0)
