/*
 * report.js - draws `hangwatch html`'s page from its data (the JSON in the
 * element #hw-data, written by src/cli/html.c).  Embedded into the page by
 * the build (src/cli/html/embed.cmake).
 *
 * Everything in the data came from reports, which anyone may have written:
 * it reaches the page only as text (textContent, text nodes, SVG text and
 * attribute values set through the DOM), never parsed as markup; no URL
 * comes from the data, and nothing is loaded from anywhere.
 */
'use strict';
(function () {
  var SVG_NS = 'http://www.w3.org/2000/svg';
  var data = null;
  var app = document.getElementById('app');
  var tooltip = null;
  var redraws = [];

  /* ---- building the DOM ---- */

  function add(parent, child) {
    if (child === null || child === undefined || child === false) {
      return;
    }
    if (Array.isArray(child)) {
      child.forEach(function (c) { add(parent, c); });
    } else if (typeof child === 'string' || typeof child === 'number') {
      parent.appendChild(document.createTextNode(String(child)));
    } else {
      parent.appendChild(child);
    }
  }

  /* An element; attrs holds attribute names of this file only, and values
   * set as values (never parsed). */
  function h(tag, attrs) {
    var e = document.createElement(tag);
    var a = attrs || {};
    Object.keys(a).forEach(function (k) { e.setAttribute(k, String(a[k])); });
    for (var i = 2; i < arguments.length; i++) {
      add(e, arguments[i]);
    }
    return e;
  }

  function s(tag, attrs) {
    var e = document.createElementNS(SVG_NS, tag);
    var a = attrs || {};
    Object.keys(a).forEach(function (k) { e.setAttribute(k, String(a[k])); });
    for (var i = 2; i < arguments.length; i++) {
      add(e, arguments[i]);
    }
    return e;
  }

  /* ---- words and numbers ---- */

  function plural(n, word) {
    return n + ' ' + word + (n === 1 ? '' : 's');
  }

  function duration(us) {
    if (us >= 1000000) {
      return (us / 1000000).toFixed(3) + ' s';
    }
    if (us >= 1000) {
      return (us / 1000).toFixed(1) + ' ms';
    }
    return us + ' \u00b5s';
  }

  function utc(ms) {
    if (typeof ms !== 'number' || !isFinite(ms)) {
      return '?';
    }
    var d = new Date(ms);
    if (isNaN(d.getTime())) {
      return '?';
    }
    return d.toISOString().replace('T', ' ').slice(0, 19);
  }

  function utcPrecise(us) {
    var d = new Date(Math.floor(us / 1000));
    if (isNaN(d.getTime())) {
      return '?';
    }
    return d.toISOString().replace('T', ' ').replace('Z', '') + ' UTC';
  }

  function place(f) {
    if (!f.file) {
      return f.object ? '(' + f.object + ')' : '';
    }
    return f.file + (f.line ? ':' + f.line : '');
  }

  function langBadge(f) {
    if (f.language === 'python') {
      return h('span', {class: 'badge python', title: 'Python'}, 'py');
    }
    if (f.language === 'javascript') {
      return h('span', {class: 'badge javascript', title: 'JavaScript'}, 'js');
    }
    return null;
  }

  function groupColor(i) {
    return 'hsl(' + Math.round((i * 137.508 + 20) % 360) + ', 62%, 52%)';
  }

  function hashHue(text) {
    var x = 0;
    for (var i = 0; i < text.length; i++) {
      x = (x * 31 + text.charCodeAt(i)) >>> 0;
    }
    return x;
  }

  function frameColor(f) {
    var x = hashHue(f.name || '');
    if (f.language === 'python') {
      return 'hsl(' + (200 + x % 30) + ', 65%, ' + (62 + x % 10) + '%)';
    }
    if (f.language === 'javascript') {
      return 'hsl(' + (50 + x % 25) + ', 75%, ' + (58 + x % 10) + '%)';
    }
    return 'hsl(' + (x % 45) + ', 78%, ' + (60 + x % 12) + '%)';
  }

  /* ---- the tooltip ---- */

  function showTip(event, lines) {
    tooltip.textContent = lines.join('\n');
    tooltip.style.display = 'block';
    var x = event.clientX + 14, y = event.clientY + 14;
    var r = tooltip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 4) {
      x = Math.max(4, event.clientX - r.width - 14);
    }
    if (y + r.height > window.innerHeight - 4) {
      y = Math.max(4, event.clientY - r.height - 14);
    }
    tooltip.style.left = x + 'px';
    tooltip.style.top = y + 'px';
  }

  function hideTip() {
    tooltip.style.display = 'none';
  }

  /* ---- the summary ---- */

  function header() {
    var parts = [plural(data.hangs, 'hang') + ' in ' + plural(data.group_count, 'group') + ', from ' +
                 plural(data.reports, 'report')];
    var notes = [];
    if (data.not_hangs > 0) {
      notes.push(plural(data.not_hangs, 'stutter or snapshot report') + ' set aside (not hangs)');
    }
    if (data.unreadable > 0) {
      notes.push(data.unreadable + (data.unreadable === 1 ? ' file or path' : ' files or paths') +
                 ' could not be read (named when the page was made)');
    }
    if (data.group_count > data.groups.length) {
      notes.push('the table shows the ' + data.groups.length + ' groups with the most hang time');
    }
    if (data.groups.length > data.detailed) {
      notes.push('stacks and flame graphs of the ' + data.detailed + ' groups with the most hang time');
    }
    return [
      h('h1', {}, 'Hangs'),
      h('p', {}, parts[0] + '.'),
      notes.length ? h('p', {class: 'note'}, notes.join('; ') + '.') : null,
      h('p', {class: 'note'}, 'Made by ' + data.generator + ' on ' + utc(data.generated_ms) +
        ' UTC. Times are UTC; a duration is the hang\'s whole length where its end was recorded, else ' +
        'its length when it was detected.')
    ];
  }

  var COLUMNS = [
    {title: 'Group', key: function (g, i) { return i; }},
    {title: 'Count', num: true, key: function (g) { return g.count; }},
    {title: 'Total', num: true, key: function (g) { return g.total_us; }},
    {title: 'Median', num: true, key: function (g) { return g.median_us; }},
    {title: 'Worst', num: true, key: function (g) { return g.worst_us; }},
    {title: 'First seen (UTC)', key: function (g) { return g.first_ms === undefined ? -Infinity : g.first_ms; }},
    {title: 'Last seen (UTC)', key: function (g) { return g.last_ms === undefined ? -Infinity : g.last_ms; }},
    {title: 'Processes', key: function (g) { return g.processes.join(', '); }},
    {title: 'Culprit', key: function (g) { return g.culprit ? g.culprit.name : ''; }}
  ];

  /* The table names the culprit's file without its directories (the
   * whole path is its title, and in the group's stack). */
  function culpritCell(g) {
    if (!g.culprit) {
      return h('span', {class: 'muted'}, 'unknown (no frame names a function)');
    }
    var f = g.culprit;
    var where = f.file ? h('span', {class: 'culprit-place', title: place(f)},
                           f.file.split('/').pop() + (f.line ? ':' + f.line : '')) : null;
    return [langBadge(f), h('span', {class: 'culprit-name'}, f.name), where ? [' ', where] : null];
  }

  function groupLabel(i) {
    var label = [h('span', {class: 'swatch'}), '#' + (i + 1)];
    label[0].style.background = groupColor(i);
    if (data.groups[i].detail) {
      return h('a', {href: '#g-' + (i + 1)}, label);
    }
    return h('span', {}, label);
  }

  function table() {
    var groups = data.groups;
    var rows = groups.map(function (g, i) {
      var processes = g.processes.join(', ') + (g.processes_more > 0 ? ' +' + g.processes_more + ' more' : '');
      var count = [String(g.count)];
      if (g.follow_up_reports > 0) {
        count.push(h('div', {class: 'note', title: 'later reports of these hangs: their culprit moved while ' +
          'they lasted'}, '+' + g.follow_up_reports + ' follow-up' + (g.follow_up_reports === 1 ? '' : 's')));
      }
      var total = [duration(g.total_us)];
      if (g.open > 0) {
        total.push(h('div', {class: 'note', title: 'hangs whose end was never recorded: their time until ' +
          'detection is counted'}, g.open + ' open'));
      }
      var tr = h('tr', {'data-group': i + 1},
        h('td', {}, groupLabel(i)),
        h('td', {class: 'num'}, count),
        h('td', {class: 'num'}, total),
        h('td', {class: 'num'}, duration(g.median_us)),
        h('td', {class: 'num'}, duration(g.worst_us)),
        h('td', {class: 'time'}, g.first_ms === undefined ? '?' : utc(g.first_ms)),
        h('td', {class: 'time'}, g.last_ms === undefined ? '?' : utc(g.last_ms)),
        h('td', {}, processes),
        h('td', {class: 'culprit'}, culpritCell(g)));
      return {tr: tr, g: g, i: i};
    });
    var tbody = h('tbody', {});
    rows.forEach(function (r) { tbody.appendChild(r.tr); });
    var ths = COLUMNS.map(function (c, k) {
      var th = h('th', {scope: 'col', class: c.num ? 'num' : ''}, h('button', {type: 'button'}, c.title));
      th.firstChild.addEventListener('click', function () { sortBy(k); });
      return th;
    });
    var state = {column: 2, descending: true};
    function sortBy(k) {
      if (state.column === k) {
        state.descending = !state.descending;
      } else {
        state.column = k;
        state.descending = COLUMNS[k].num === true;
      }
      apply();
    }
    function apply() {
      var c = COLUMNS[state.column];
      rows.sort(function (a, b) {
        var x = c.key(a.g, a.i), y = c.key(b.g, b.i);
        var order = typeof x === 'string' ? x.localeCompare(y) : (x < y ? -1 : x > y ? 1 : 0);
        if (order === 0) {
          order = a.i - b.i;
          return order;
        }
        return state.descending ? -order : order;
      });
      rows.forEach(function (r) { tbody.appendChild(r.tr); });
      ths.forEach(function (th, k) {
        if (k === state.column) {
          th.setAttribute('aria-sort', state.descending ? 'descending' : 'ascending');
        } else {
          th.removeAttribute('aria-sort');
        }
      });
    }
    apply();
    return h('div', {class: 'table-wrap'},
      h('table', {class: 'groups', id: 'groups'}, h('thead', {}, h('tr', {}, ths)), tbody));
  }

  /* ---- a group ---- */

  function stackList(frames, culprit, more, repeat, omitted, omittedAt) {
    var items = frames.map(function (f, k) {
      var where = place(f);
      var li = h('li', {}, h('span', {class: 'idx'}, String(k)), langBadge(f), f.name,
        where ? h('span', {class: 'place'}, '  ' + where) : null,
        f.line_is_start ? h('span', {class: 'place line-start', title: 'V8 keeps no position for this ' +
          'optimised code that hangwatch reads: the line is where the function starts, not where it was'},
          ' (the function\'s first line)') : null,
        repeat ? h('span', {class: 'place'}, '  \u00d7' + f.repeat) : null);
      if (k === culprit) {
        li.className = 'culprit';
      }
      return li;
    });
    if (omitted > 0 && omittedAt <= items.length) {
      /* A stack cut short: its innermost frames, the gap, its outermost. */
      items.splice(omittedAt, 0, h('li', {class: 'muted'}, '\u2026 ' + plural(omitted, 'frame') + ' omitted \u2026'));
    }
    if (more > 0) {
      items.push(h('li', {class: 'muted'}, '\u2026 ' + plural(more, 'more frame')));
    }
    if (items.length === 0) {
      items.push(h('li', {class: 'muted'}, 'the stack was not captured'));
    }
    return h('ol', {class: 'stack'}, items);
  }

  function threadsList(d) {
    if (!d.threads) {
      return h('p', {class: 'note'}, d.threads_note || 'no other threads');
    }
    if (d.threads.length === 0) {
      return h('p', {class: 'note'}, 'The process had no other thread.');
    }
    var items = d.threads.map(function (t) {
      var frames = (t.frames || []).map(function (f) { return f.name; });
      if (t.more > 0) {
        frames.push('\u2026');
      }
      var state = t.status && t.status !== 'captured' ? ' [' + t.status + (t.error ? ': ' + t.error : '') + ']' : '';
      var pyName = t.python_name ? ', Python\'s ' + t.python_name : '';
      return h('li', {}, h('span', {class: 'tname'}, t.name), ' (tid ' + t.tid + pyName + ')' + state + ': ',
        frames.length ? frames.join(' \u2190 ') : h('span', {class: 'muted'}, 'no frames'));
    });
    if (d.threads_more > 0) {
      items.push(h('li', {class: 'muted'}, '\u2026 and ' + plural(d.threads_more, 'more thread')));
    }
    return h('ul', {class: 'threads'}, items);
  }

  /* Where the newest hang's time went (hangwatch.time): a bar of its
   * window, on a CPU / waiting for a CPU (throttled within it) / asleep,
   * and the verdict. */
  function timeBar(d) {
    var t = d.time;
    if (!t || !(t.window_us > 0)) {
      return d.cause ? h('span', {}, d.cause) : h('span', {class: 'muted'}, 'not measured');
    }
    var parts = [['on CPU', t.on_cpu_us, 'cpu'], ['waiting for a CPU', t.runqueue_us, 'queue'],
      ['asleep', t.blocked_us, 'asleep']];
    var bar = h('span', {class: 'timebar', title: 'over ' + duration(t.window_us)});
    parts.forEach(function (p) {
      var pct = Math.max(0, Math.min(100, 100 * p[1] / t.window_us));
      if (pct > 0) {
        var part = h('span', {class: 'part ' + p[2], title: p[0] + ' ' + duration(p[1])});
        part.style.width = pct.toFixed(1) + '%'; /* through the CSSOM: the page's policy forbids style attributes */
        add(bar, part);
      }
    });
    var words = parts.map(function (p) { return duration(p[1]) + ' ' + p[0]; }).join(', ') +
      (t.throttled_us > 0 ? ' (' + duration(t.throttled_us) + ' throttled)' : '') + ' of ' + duration(t.window_us);
    return h('span', {}, bar, ' ', h('strong', {}, d.cause || 'unknown'), ': ' + words);
  }

  function groupSection(g, i) {
    var d = g.detail;
    var title = g.culprit ? g.culprit.name : 'unknown culprit';
    var heading = h('h2', {}, groupLabel(i), ' ', title);
    var facts = h('dl', {class: 'facts'},
      h('dt', {}, 'Hangs'), h('dd', {}, g.count + ' (total ' + duration(g.total_us) + ', median ' +
        duration(g.median_us) + ', worst ' + duration(g.worst_us) + ')'),
      h('dt', {}, 'Seen'), h('dd', {}, g.first_ms === undefined ? '?' :
        utc(g.first_ms) + ' to ' + utc(g.last_ms) + ' UTC'),
      h('dt', {}, 'Grouping key'), h('dd', {class: 'mono'}, g.key),
      h('dt', {}, 'Newest report'), h('dd', {class: 'mono'}, d.report),
      h('dt', {}, 'Hung thread'), h('dd', {}, d.thread + ' (tid ' + d.tid + ') of ' + d.process + ' (pid ' +
        d.pid + '), busy ' + duration(d.busy_us) + ' when detected' +
        (d.final_us !== undefined ? ', ' + duration(d.final_us) + ' in all' : '') +
        (d.hang_end ? ' (' + d.hang_end.replace(/_/g, ' ') + ')' : '')),
      h('dt', {}, 'Where its time went'), h('dd', {class: 'time'}, timeBar(d)));
    var hungStack = [h('h3', {}, 'The hung thread\'s stack'), stackList(d.stack, d.culprit, d.stack_more, false,
      d.stack_omitted || 0, d.stack_omitted_at || 0)];
    var section;
    if (d.holder) {
      /* it waits for what another thread holds: that thread's stack beside
       * its own, the culprit (the group's label) marked in it */
      var hd = d.holder;
      var who = hd.name + (hd.python_name ? ', Python\'s ' + hd.python_name : '') + ' (tid ' + hd.tid + ')';
      section = h('section', {class: 'group', id: 'g-' + (i + 1)}, heading, facts,
        h('div', {class: 'stack-pair'},
          h('div', {class: 'waiter'}, hungStack, h('p', {class: 'note'}, 'It waits for ' + hd.holds + ', held by ' +
            who + '.')),
          h('div', {class: 'holder'}, h('h3', {}, 'The holder\'s stack: ' + who + ' holds ' + hd.holds),
            stackList(hd.stack, hd.culprit, hd.more, false, 0, 0))));
    } else {
      section = h('section', {class: 'group', id: 'g-' + (i + 1)}, heading, facts, hungStack);
    }
    if (d.runtime_note) {
      /* The interpreter's frames were not read (an unsupported version):
       * the stack is the interpreter's own, the culprit its innermost
       * frame that is not its machinery. */
      add(section, h('p', {class: 'note runtime-note'}, d.runtime_note));
    }
    if (d.flame) {
      add(section, flameSection(d.flame, d.point));
    } else if (d.point) {
      add(section, h('p', {class: 'note'}, 'These reports carry early sampling\'s Point Stack but not its ' +
        'samples (written by an older hangwatch): no flame graph.'));
    } else {
      add(section, h('p', {class: 'note'}, 'No flame graph: the reports carry no samples (run with ' +
        '--early-sampling for them).'));
    }
    if (d.point) {
      add(section, h('details', {},
        h('summary', {}, 'Point Stack of the newest report (' + plural(d.point.samples, 'sample') + ', every ' +
          duration(d.point.interval_us) + '; \u00d7 how often each address was sampled)'),
        stackList(d.point.frames, -1, d.point.more, true)));
    }
    var others = d.threads ? d.threads.length + (d.threads_more || 0) : 0;
    add(section, h('details', others <= 12 ? {open: ''} : {},
      h('summary', {}, 'Other threads of the newest report' + (d.threads ? ' (' + others + ')' : '')),
      threadsList(d)));
    return section;
  }

  /* ---- flame graphs ---- */

  var ROW = 18;

  /* The tree of a flame graph's nodes ([parent, frame, samples, first
   * line, last line, on the Point Stack], parents first).  With `mine`,
   * only the user's own frames (in_app): each sample keeps the frames of
   * its path that are the user's, merged again where they are one. */
  function flameTree(fl, mine) {
    var all = fl.nodes.map(function (n, k) {
      return {k: k, parent: n[0], fi: n[1], frame: n[1] >= 0 ? fl.frames[n[1]] : null, count: n[2], lineMin: n[3],
              lineMax: n[4], point: n[5] === 1, children: []};
    });
    all.forEach(function (n) {
      if (n.parent >= 0 && n.parent < n.k) {
        all[n.parent].children.push(n);
      }
    });
    if (!mine) {
      return all;
    }
    var out = [{k: 0, parent: -1, fi: -1, frame: null, count: all[0].count, lineMin: 0, lineMax: 0,
                point: all[0].point, children: [], byFrame: {}}];
    all.forEach(function (n) {
      n.mine = n.parent >= 0 ? all[n.parent].mine : 0; /* its nearest own node in `out` */
      if (n.frame && n.frame.in_app) {
        var parent = out[n.mine];
        var at = parent.byFrame[n.fi];
        if (at === undefined) {
          at = out.length;
          parent.byFrame[n.fi] = at;
          out.push({k: at, parent: parent.k, fi: n.fi, frame: n.frame, count: 0, lineMin: 0, lineMax: 0,
                    point: false, children: [], byFrame: {}});
          parent.children.push(out[at]);
        }
        n.mine = at;
      }
    });
    /* each sample counted once, in its innermost own node: a node's own
     * samples are its count less its children's */
    all.forEach(function (n) {
      var own = n.count;
      n.children.forEach(function (c) { own -= c.count; });
      for (var m = out[n.mine]; own > 0 && m.parent >= 0; m = out[m.parent]) {
        m.count += own;
      }
      if (n.frame && n.frame.in_app) {
        var o = out[n.mine];
        o.point = o.point || n.point;
        if (n.lineMin > 0 && (o.lineMin === 0 || n.lineMin < o.lineMin)) {
          o.lineMin = n.lineMin;
        }
        o.lineMax = Math.max(o.lineMax, n.lineMax);
      }
    });
    return out;
  }

  function flameSection(fl, point) {
    var chart = h('div', {class: 'chart flame-chart'});
    var hasMine = fl.frames.some(function (f) { return f.in_app; });
    var mine = false;
    var nodes, depth, total, focus;

    function build() {
      nodes = flameTree(fl, mine);
      depth = 0;
      nodes.forEach(function (n) {
        n.children.sort(function (a, b) {
          return b.count - a.count || (a.frame.name < b.frame.name ? -1 : a.frame.name > b.frame.name ? 1 : 0);
        });
      });
      (function walk(n, level) {
        n.depth = level;
        depth = Math.max(depth, level);
        n.children.forEach(function (c) { walk(c, level + 1); });
      })(nodes[0], 0);
      total = nodes[0].count;
      focus = nodes[0];
    }
    build();
    function label(n) {
      if (!n.frame) {
        return 'all samples';
      }
      return n.frame.name;
    }

    function tipLines(n) {
      var pct = total > 0 ? (100 * n.count / total).toFixed(1) : '0.0';
      var lines = [label(n)];
      if (n.frame) {
        var file = n.frame.file || (n.frame.object ? '(' + n.frame.object + ')' : '(no source file)');
        var line = n.lineMin > 0 ? ':' + n.lineMin + (n.lineMax > n.lineMin ? '\u2013' + n.lineMax : '') : '';
        lines.push(file + line);
      }
      lines.push(plural(n.count, 'sample') + ' (' + pct + ' %)');
      if (n.point) {
        lines.push('on the Point Stack');
      }
      if (n.frame && n.fi === fl.culprit) {
        lines.push('the culprit: the hang\'s own code');
      }
      return lines;
    }

    function draw() {
      var width = Math.max(320, chart.clientWidth || 1000);
      var height = (depth + 1) * ROW + 2;
      var svg = s('svg', {class: 'flame', width: width, height: height, viewBox: '0 0 ' + width + ' ' + height,
                          role: 'img', 'aria-label': 'flame graph of ' + plural(total, 'sample')});
      /* the focused node spans the width; its ancestors too */
      var scale = focus.count > 0 ? width / focus.count : 0;
      var ancestors = [];
      for (var a = focus; a.parent >= 0; a = nodes[a.parent]) {
        ancestors.push(nodes[a.parent]);
      }
      ancestors.forEach(function (n) { drawNode(svg, n, 0, width); });
      (function layout(n, x) {
        var w = n.count * scale;
        if (w < 0.4) {
          return;
        }
        drawNode(svg, n, x, w);
        var cx = x;
        n.children.forEach(function (c) {
          layout(c, cx);
          cx += c.count * scale;
        });
      })(focus, 0);
      svg.addEventListener('mousemove', function (event) {
        var g = event.target.closest ? event.target.closest('g.fg-node') : null;
        if (g) {
          showTip(event, tipLines(nodes[Number(g.getAttribute('data-node'))]));
        } else {
          hideTip();
        }
      });
      svg.addEventListener('mouseleave', hideTip);
      svg.addEventListener('click', function (event) {
        var g = event.target.closest ? event.target.closest('g.fg-node') : null;
        if (g) {
          var n = nodes[Number(g.getAttribute('data-node'))];
          focus = n === focus && n.parent >= 0 ? nodes[n.parent] : n;
          draw();
        }
      });
      chart.textContent = '';
      chart.appendChild(svg);
    }

    function drawNode(svg, n, x, w) {
      var y = n.depth * ROW;
      var culprit = n.frame !== null && n.fi === fl.culprit;
      var g = s('g', {class: 'fg-node' + (n.point ? ' fg-point' : '') + (culprit ? ' fg-culprit' : ''), 'data-node': n.k,
                      'data-depth': n.depth, 'data-count': n.count});
      var rect = s('rect', {x: x.toFixed(2), y: y + 1, width: Math.max(w - 0.5, 0.5).toFixed(2), height: ROW - 2,
                            rx: 2, fill: n.frame ? frameColor(n.frame) : '#c9d3dc'});
      g.appendChild(rect);
      if (culprit) {
        g.appendChild(s('rect', {class: 'fg-culprit-bar', x: x.toFixed(2), y: y + ROW - 4,
                                 width: Math.max(w - 0.5, 0.5).toFixed(2), height: 3}));
      }
      var text = label(n);
      var fits = Math.floor((w - 6) / 6.7);
      if (fits >= 3) {
        var shown = text.length > fits ? text.slice(0, fits - 1) + '\u2026' : text;
        g.appendChild(s('text', {x: (x + 3).toFixed(2), y: y + ROW - 5}, shown));
      }
      svg.appendChild(g);
    }

    redraws.push(draw);
    var notes = [];
    if (fl.reports > 1) {
      notes.push('the samples of ' + fl.reports + ' reports');
    }
    if (fl.cut > 0) {
      notes.push(plural(fl.cut, 'sample') + '\' stacks cut short (the graph is bounded)');
    }
    if (fl.left_out > 0) {
      notes.push(plural(fl.left_out, 'sample') + ' the reports left out');
    }
    var toggle = null;
    if (hasMine) {
      var box = h('input', {type: 'checkbox', class: 'only-mine'});
      box.addEventListener('change', function () {
        mine = box.checked;
        build();
        draw();
      });
      toggle = h('label', {class: 'toggle'}, box, ' only your code');
    }
    return [
      h('h3', {}, 'Flame graph of ' + plural(total, 'sample') + (notes.length ? ' (' + notes.join('; ') + ')' : '')),
      h('div', {class: 'legend'}, 'Callers above callees, each frame as wide as its share of the samples; ' +
        'Python and JavaScript frames in place of the interpreter frames that run them; hover for details, ' +
        'click to zoom.',
        point ? [h('span', {class: 'key point'}), 'the Point Stack of the newest report'] : null,
        fl.culprit >= 0 ? [h('span', {class: 'key culprit'}), 'the culprit'] : null, toggle),
      chart
    ];
  }

  /* ---- timelines ---- */

  function niceStep(span, target) {
    var raw = span / Math.max(1, target);
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) {
      if (steps[i] * p >= raw) {
        return steps[i] * p;
      }
    }
    return 10 * p;
  }

  function secondsLabel(us) {
    var sec = us / 1000000;
    if (Math.abs(sec) >= 3600) {
      return '+' + (sec / 3600).toFixed(1) + ' h';
    }
    if (Math.abs(sec) >= 60) {
      return '+' + (sec / 60).toFixed(1) + ' min';
    }
    return '+' + (Math.abs(sec) < 10 ? sec.toFixed(1) : sec.toFixed(0)) + ' s';
  }

  function lanePicture(lane) {
    var names = {};
    (lane.threads || []).forEach(function (t) { names[t[0]] = t[1]; });
    var tids = [];
    lane.hangs.forEach(function (b) {
      if (tids.indexOf(b[1]) < 0) {
        tids.push(b[1]);
      }
    });
    tids.sort(function (a, b) { return (a === lane.pid ? -1 : 0) - (b === lane.pid ? -1 : 0) || a - b; });
    var t0 = Infinity, t1 = -Infinity;
    lane.hangs.forEach(function (b) {
      t0 = Math.min(t0, b[2]);
      t1 = Math.max(t1, b[4] >= 0 ? b[4] : b[3]);
    });
    var span = Math.max(t1 - t0, 1000);
    t0 -= span * 0.02;
    span *= 1.04;
    var chart = h('div', {class: 'chart'});
    var LEFT = 150, ROWH = 22, TOP = 6;

    function draw() {
      var width = Math.max(420, chart.clientWidth || 1000);
      var plot = width - LEFT - 10;
      var height = TOP + tids.length * ROWH + 28;
      var svg = s('svg', {class: 'timeline', width: width, height: height, viewBox: '0 0 ' + width + ' ' + height,
                          role: 'img', 'aria-label': 'hangs of ' + lane.process + ' over time'});
      function xOf(us) {
        return LEFT + (us - t0) / span * plot;
      }
      tids.forEach(function (tid, r) {
        var y = TOP + r * ROWH;
        svg.appendChild(s('line', {class: 'row', x1: LEFT, x2: width - 10, y1: y + ROWH - 1, y2: y + ROWH - 1}));
        var name = (names[tid] !== undefined ? names[tid] : '?');
        var text = name.length > 14 ? name.slice(0, 13) + '\u2026' : name;
        svg.appendChild(s('text', {x: 4, y: y + ROWH - 7}, text + ' ' + tid));
      });
      var axisY = TOP + tids.length * ROWH + 4;
      svg.appendChild(s('line', {class: 'axis', x1: LEFT, x2: width - 10, y1: axisY, y2: axisY}));
      var start = t0 + span * 0.02 / 1.04;
      var step = niceStep(span, Math.max(2, Math.floor(plot / 110)));
      for (var t = 0; start + t <= t0 + span; t += step) {
        var x = xOf(start + t);
        svg.appendChild(s('line', {class: 'tick', x1: x, x2: x, y1: axisY, y2: axisY + 4}));
        svg.appendChild(s('text', {x: x - 8, y: axisY + 16}, t === 0 ? utcPrecise(start).slice(11, 19) : secondsLabel(t)));
      }
      lane.hangs.forEach(function (b) {
        var r = tids.indexOf(b[1]);
        var y = TOP + r * ROWH + 3;
        var open = b[4] < 0;
        var x1 = xOf(b[2]), x2 = xOf(open ? b[3] : b[4]);
        var g = s('g', {class: 'bar', 'data-group': b[0] + 1});
        var rect = s('rect', {class: 'hang' + (open ? ' open' : ''), x: x1.toFixed(2), y: y,
                              width: Math.max(x2 - x1, 2).toFixed(2), height: ROWH - 7, rx: 2,
                              fill: groupColor(b[0])});
        g.appendChild(rect);
        var xd = xOf(b[3]);
        g.appendChild(s('line', {class: 'detect', x1: xd.toFixed(2), x2: xd.toFixed(2), y1: y - 2, y2: y + ROWH - 5}));
        var grp = data.groups[b[0]];
        var lines = ['#' + (b[0] + 1) + ' ' + (grp && grp.culprit ? grp.culprit.name : 'unknown culprit'),
                     'started ' + utcPrecise(b[2]),
                     'detected after ' + duration(b[3] - b[2]),
                     open ? 'its end was not recorded' : 'lasted ' + duration(b[4] - b[2])];
        g.addEventListener('mousemove', function (event) { showTip(event, lines); });
        g.addEventListener('mouseleave', hideTip);
        g.addEventListener('click', function () {
          if (grp && grp.detail) {
            location.hash = '#g-' + (b[0] + 1);
          }
        });
        svg.appendChild(g);
      });
      chart.textContent = '';
      chart.appendChild(svg);
    }
    redraws.push(draw);
    return chart;
  }

  function timelines() {
    var section = h('section', {class: 'timeline', id: 'timeline'}, h('h2', {}, 'Timeline'),
      h('div', {class: 'legend'}, 'Each hang from its start to its end, in its group\'s colour;',
        h('span', {class: 'key detect'}), 'detected;', h('span', {class: 'key open'}),
        'end not recorded (drawn to the detection).'));
    if (data.timeline.length === 0) {
      add(section, h('p', {class: 'note'}, 'No hang could be placed in time.'));
    }
    data.timeline.forEach(function (lane) {
      add(section, h('h3', {}, lane.process + ' (pid ' + lane.pid + '): ' + plural(lane.hangs.length + lane.more, 'hang')));
      add(section, lanePicture(lane));
      if (lane.more > 0) {
        add(section, h('p', {class: 'note'}, plural(lane.more, 'later hang') + ' not drawn.'));
      }
    });
    var notes = [];
    if (data.timeline_lanes_more > 0) {
      notes.push(plural(data.timeline_lanes_more, 'more process') + ' not drawn');
    }
    if (data.timeline_unplaced > 0) {
      notes.push(plural(data.timeline_unplaced, 'hang') + ' whose reports do not say when');
    }
    if (notes.length) {
      add(section, h('p', {class: 'note'}, notes.join('; ') + '.'));
    }
    return section;
  }

  /* ---- the page ---- */

  function render() {
    data = JSON.parse(document.getElementById('hw-data').textContent);
    tooltip = h('div', {id: 'tooltip', role: 'tooltip'});
    document.body.appendChild(tooltip);
    add(app, header());
    add(app, table());
    add(app, timelines());
    data.groups.forEach(function (g, i) {
      if (g.detail) {
        add(app, groupSection(g, i));
      }
    });
    redraws.forEach(function (f) { f(); });
    var pending = null;
    window.addEventListener('resize', function () {
      clearTimeout(pending);
      pending = setTimeout(function () { redraws.forEach(function (f) { f(); }); }, 120);
    });
    document.body.setAttribute('data-rendered', 'yes');
  }

  try {
    render();
  } catch (e) {
    app.textContent = '';
    add(app, h('p', {class: 'error'}, 'This page could not be drawn: ' + String(e && e.message)));
    console.error(e);
  }
})();
