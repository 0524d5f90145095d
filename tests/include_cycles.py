#!/usr/bin/env python3
# No include cycle between source units. A unit is x.h with x.cpp (src/core/text.h and
# src/core/text.cpp are the unit core/text); A -> B when A.h or A.cpp has #include "B.h". A cycle
# means neither unit can be read, tested or moved without the other: the shared piece belongs in
# a header of its own, or the function that closes the loop in the unit it serves. Prints each
# cycle with the include lines that form it, and exits 1 when there is one.
# Usage: tests/include_cycles.py [SRC_DIR]   (default: ../src beside this script)
import os
import re
import sys

INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def unit_of(path):
  """'core/text.h' -> 'core/text'."""
  return os.path.splitext(path)[0].replace(os.sep, "/")


def read_graph(src):
  """units: every unit under src; edges: {unit: {target unit: ['file:line: #include ...', ...]}}, a
  unit's own header left out."""
  units, edges = set(), {}
  for root, dirs, files in os.walk(src):
    dirs.sort()
    for name in sorted(files):
      if not name.endswith((".h", ".cpp")):
        continue
      path = os.path.join(root, name)
      rel = os.path.relpath(path, src).replace(os.sep, "/")
      unit = unit_of(rel)
      units.add(unit)
      with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
          m = INCLUDE.match(line)
          if not m:
            continue
          target = unit_of(m.group(1))
          if target != unit:
            edges.setdefault(unit, {}).setdefault(target, []).append(f'{rel}:{number}: #include "{m.group(1)}"')
  # Includes of files outside src/ (or of test helpers) are not units: no edge.
  return units, {u: {t: w for t, w in ts.items() if t in units} for u, ts in edges.items()}


def strongly_connected(units, edges):
  """Tarjan's algorithm with an explicit stack (no recursion limit); components of 2 or more."""
  index, low, on_stack, stack, out = {}, {}, set(), [], []
  counter = 0
  for start in sorted(units):
    if start in index:
      continue
    work = [(start, iter(sorted(edges.get(start, {}))))]
    index[start] = low[start] = counter
    counter += 1
    stack.append(start)
    on_stack.add(start)
    while work:
      v, children = work[-1]
      w = next(children, None)
      if w is not None:
        if w not in index:
          index[w] = low[w] = counter
          counter += 1
          stack.append(w)
          on_stack.add(w)
          work.append((w, iter(sorted(edges.get(w, {})))))
        elif w in on_stack:
          low[v] = min(low[v], index[w])
        continue
      work.pop()
      if work:
        parent = work[-1][0]
        low[parent] = min(low[parent], low[v])
      if low[v] == index[v]:
        component = []
        while True:
          w = stack.pop()
          on_stack.discard(w)
          component.append(w)
          if w == v:
            break
        if len(component) > 1:
          out.append(sorted(component))
  return sorted(out)


def cycle_in(component, edges):
  """Loops that together show every unit of the component: the shortest loop through its first
  unit (breadth-first search back to it), then one through each unit no loop has shown yet."""
  members = set(component)
  loops, covered = [], set()
  for start in component:
    if start in covered:
      continue
    # Shortest path start -> ... -> start inside the component.
    previous, frontier, found = {start: None}, [start], None
    while frontier and found is None:
      following = []
      for v in frontier:
        for w in sorted(edges.get(v, {})):
          if w not in members:
            continue
          if w == start:
            found = v
            break
          if w not in previous:
            previous[w] = v
            following.append(w)
        if found is not None:
          break
      frontier = following
    path = [start]
    v = found
    while v is not None and v != start:
      path.append(v)
      v = previous[v]
    path = [start] + list(reversed(path[1:])) + [start]
    loops.append(path)
    covered.update(path)
  return loops


def main():
  here = os.path.dirname(os.path.abspath(__file__))
  src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "src")
  if not os.path.isdir(src):
    print(f"include cycles: no source folder '{src}'")
    return 2
  units, edges = read_graph(src)
  components = strongly_connected(units, edges)
  if not components:
    print(f"include cycles: none among {len(units)} units")
    return 0
  for component in components:
    for loop in cycle_in(component, edges):
      print("include cycle: " + " -> ".join(loop))
      for a, b in zip(loop, loop[1:]):
        for where in edges[a][b]:
          print(f"  {where}")
  return 1


if __name__ == "__main__":
  sys.exit(main())
