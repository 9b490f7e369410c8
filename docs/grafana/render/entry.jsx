// Renders docs/grafana/superpeer.json with Grafana's own panel library
// (@grafana/ui, @grafana/data): no Grafana server. make grafana-shot builds
// it with esbuild and opens index.html in headless Chromium:
//
//   index.html?prom=http://127.0.0.1:9090&from=MS&to=MS&scrape=5s&width=1600
//
// What it does as Grafana does: lays panels out by gridPos (24 columns, rows of
// 30 px, 8 px margins); resolves the variables (datasource: the Prometheus at
// prom; network and instance: label_values queries, "All" selected, expanded
// to an escaped regex alternation as Grafana's Prometheus data source does);
// substitutes $__interval and $__rate_interval (rangeUtil.calculateInterval on
// the panel's width, bounded below by the data source's scrape interval;
// rate interval max(interval + scrape, 4 × scrape)); queries query_range with
// that step, nulls where a step has no sample, {{label}} legends; applies the
// panel's fieldConfig (applyFieldOverrides) and draws timeseries panels with
// TimeSeries, stat panels with BigValue (getFieldDisplayValues with its
// sparkline), each in PanelChrome.
//
// Stand-ins, as @grafana/ui does not export them: the state-timeline panel
// (drawn here from its value mappings, fillOpacity, rowHeight and mergeValues),
// the row headers and the variable bar at the top.
//
// window.rendered is true once every panel has drawn; window.renderReport
// lists each panel's series and points (or its error).
import React from 'react';
import { createRoot } from 'react-dom/client';
import {
  BigValue,
  BigValueColorMode,
  BigValueGraphMode,
  BigValueJustifyMode,
  BigValueTextMode,
  GlobalStyles,
  PanelChrome,
  ThemeContext,
  TimeSeries,
} from '@grafana/ui';
import 'uplot/dist/uPlot.min.css';
import {
  FieldType,
  applyFieldOverrides,
  createDataFrame,
  createTheme,
  dateTime,
  getFieldDisplayValues,
  rangeUtil,
} from '@grafana/data';

const params = new URLSearchParams(location.search);
const PROM = params.get('prom') || 'http://127.0.0.1:9090';
const TO = Number(params.get('to')) || Date.now();
const FROM = Number(params.get('from')) || TO - 3600e3;
const SCRAPE = params.get('scrape') || '15s'; // the data source's "scrape interval" setting
const WIDTH = Number(params.get('width')) || 1600;

const theme = createTheme({ colors: { mode: 'dark' } });
const timeZone = 'utc';
const timeRange = { from: dateTime(FROM), to: dateTime(TO), raw: { from: dateTime(FROM), to: dateTime(TO) } };

// Grafana's dashboard grid (react-grid-layout): GRID_COLUMN_COUNT 24,
// GRID_CELL_HEIGHT 30, GRID_CELL_VMARGIN 8, no container padding.
const COLS = 24;
const CELL_H = 30;
const MARGIN = 8;
const colWidth = (WIDTH - MARGIN * (COLS - 1)) / COLS;
function place(g) {
  return {
    left: Math.round((colWidth + MARGIN) * g.x),
    top: Math.round((CELL_H + MARGIN) * g.y),
    width: Math.round(colWidth * g.w + Math.max(0, g.w - 1) * MARGIN),
    height: Math.round(CELL_H * g.h + Math.max(0, g.h - 1) * MARGIN),
  };
}

async function promGet(path, args) {
  const u = new URL(PROM + path);
  for (const [k, v] of args) {
    u.searchParams.append(k, v);
  }
  const r = await fetch(u);
  const j = await r.json();
  if (j.status !== 'success') {
    throw new Error(`${path}: ${j.errorType || r.status}: ${j.error || ''}`);
  }
  return j.data;
}

// prometheusSpecialRegexEscape of Grafana's Prometheus data source: the value
// goes inside a PromQL string used as a regex.
function regexEscape(v) {
  return v
    .replace(/\\/g, '\\\\\\\\')
    .replace(/'/g, "\\\\'")
    .replace(/"/g, '\\\\"')
    .replace(/[$^*{}[\]+?.()|]/g, '\\\\$&');
}

// A multi-value variable with "All" selected and no allValue: every value,
// escaped, as (a|b|c); one value alone unbracketed.
function allValue(values) {
  const e = values.map(regexEscape);
  return e.length === 1 ? e[0] : '(' + e.join('|') + ')';
}

function interpolate(s, vars) {
  return s.replace(/\$\{(\w+)(?::\w+)?\}|\$(\w+)/g, (m, a, b) => {
    const name = a || b;
    return name in vars ? vars[name] : m;
  });
}

async function resolveVariables(dash) {
  const vars = {};
  const shown = [];
  for (const v of dash.templating?.list ?? []) {
    if (v.type === 'datasource') {
      vars[v.name] = 'prometheus';
      shown.push([v.label || v.name, 'Prometheus']);
      continue;
    }
    if (v.type !== 'query') {
      throw new Error(`variable ${v.name}: type ${v.type} not rendered`);
    }
    const q = interpolate(typeof v.query === 'string' ? v.query : v.query.query, vars);
    const m = /^label_values\((.*),\s*(\w+)\)$/.exec(q.trim());
    if (!m) {
      throw new Error(`variable ${v.name}: query ${q} not rendered`);
    }
    const values = await promGet(`/api/v1/label/${m[2]}/values`, [
      ['match[]', m[1]],
      ['start', String(FROM / 1000)],
      ['end', String(TO / 1000)],
    ]);
    if (values.length === 0) {
      throw new Error(`variable ${v.name}: no values for ${q}`);
    }
    values.sort();
    vars[v.name] = v.includeAll ? allValue(values) : regexEscape(values[0]);
    shown.push([v.label || v.name, v.includeAll ? `All (${values.length})` : values[0]]);
  }
  return { vars, shown };
}

// The defaults the timeseries panel plugin gives fields (its FieldConfig
// builder) where the dashboard leaves them out.
const TIMESERIES_CUSTOM = {
  axisBorderShow: false,
  axisCenteredZero: false,
  axisColorMode: 'text',
  axisLabel: '',
  axisPlacement: 'auto',
  barAlignment: 0,
  barWidthFactor: 0.6,
  drawStyle: 'line',
  fillOpacity: 0,
  gradientMode: 'none',
  hideFrom: { legend: false, tooltip: false, viz: false },
  insertNulls: false,
  lineInterpolation: 'linear',
  lineWidth: 1,
  pointSize: 5,
  scaleDistribution: { type: 'linear' },
  showPoints: 'auto',
  spanNulls: false,
  stacking: { group: 'A', mode: 'none' },
  thresholdsStyle: { mode: 'off' },
};
const DEFAULT_THRESHOLDS = {
  mode: 'absolute',
  steps: [
    { color: 'green', value: null },
    { color: 'red', value: 80 },
  ],
};

function legendName(target, metric, expr) {
  const labels = { ...metric };
  if (target.legendFormat) {
    return target.legendFormat.replace(/\{\{\s*(.+?)\s*\}\}/g, (_, l) => labels[l] ?? '');
  }
  const name = labels.__name__ || '';
  delete labels.__name__;
  const ls = Object.keys(labels)
    .sort()
    .map((k) => `${k}="${labels[k]}"`);
  if (!name && ls.length === 0) {
    return expr;
  }
  return name + '{' + ls.join(', ') + '}';
}

async function queryPanel(panel, vars, width) {
  const { intervalMs } = rangeUtil.calculateInterval(timeRange, Math.max(1, Math.round(width)), SCRAPE);
  const scrapeMs = rangeUtil.intervalToMs(SCRAPE);
  const rateMs = Math.max(intervalMs + scrapeMs, 4 * scrapeMs);
  const step = Math.max(1, Math.round(intervalMs / 1000));
  const start = Math.floor(FROM / 1000 / step) * step;
  const end = Math.ceil(TO / 1000 / step) * step;
  const pv = {
    ...vars,
    __interval: `${step}s`,
    __interval_ms: String(step * 1000),
    __rate_interval: `${rateMs}ms`,
    __range: `${Math.round((TO - FROM) / 1000)}s`,
  };
  const times = [];
  for (let t = start; t <= end; t += step) {
    times.push(t * 1000);
  }
  const frames = [];
  for (const target of panel.targets ?? []) {
    const expr = interpolate(target.expr, pv);
    const data = await promGet('/api/v1/query_range', [
      ['query', expr],
      ['start', String(start)],
      ['end', String(end)],
      ['step', String(step)],
    ]);
    for (const s of data.result) {
      const byT = new Map(s.values.map(([t, v]) => [Math.round(t * 1000), Number(v)]));
      const labels = { ...s.metric };
      delete labels.__name__;
      frames.push(
        createDataFrame({
          refId: target.refId,
          name: legendName(target, s.metric, expr),
          fields: [
            { name: 'Time', type: FieldType.time, values: times.slice(), config: { interval: step * 1000 } },
            {
              name: 'Value',
              type: FieldType.number,
              labels,
              values: times.map((t) => (byT.has(t) ? byT.get(t) : null)),
              config: { displayNameFromDS: legendName(target, s.metric, expr) },
            },
          ],
        })
      );
    }
  }
  return frames;
}

// The panel's fieldConfig defaults go into each field's config here, and
// applyFieldOverrides then builds the display processors from it: its own
// merge of the defaults walks the registry of standard field options, which
// Grafana's app fills at start-up and @grafana/ui leaves empty (every option
// would be dropped). Overrides need that registry: none is rendered.
function processed(panel, frames, custom) {
  if ((panel.fieldConfig?.overrides ?? []).length > 0) {
    throw new Error('field overrides are not rendered');
  }
  const defaults = { ...panel.fieldConfig?.defaults };
  defaults.thresholds = defaults.thresholds ?? DEFAULT_THRESHOLDS;
  if (custom) {
    defaults.custom = { ...custom, ...defaults.custom };
  }
  for (const f of frames) {
    for (const field of f.fields) {
      if (field.type === FieldType.number) {
        field.config = { ...defaults, ...field.config };
      }
    }
  }
  return applyFieldOverrides({
    data: frames,
    fieldConfig: { defaults: {}, overrides: [] },
    replaceVariables: (s) => s,
    theme,
    timeZone,
  });
}

function NoData({ width, height }) {
  return (
    <div
      style={{
        width,
        height,
        display: 'flex',
        alignItems: 'center',
        justifyContent: 'center',
        color: theme.colors.text.secondary,
      }}
    >
      No data
    </div>
  );
}

function TimeseriesViz({ panel, frames, width, height }) {
  if (frames.length === 0) {
    return <NoData width={width} height={height} />;
  }
  const legend = { calcs: [], ...panel.options?.legend };
  return (
    <TimeSeries
      frames={frames}
      timeRange={timeRange}
      timeZone={timeZone}
      width={width}
      height={height}
      legend={legend}
      options={panel.options}
    />
  );
}

function StatViz({ panel, frames, width, height }) {
  const o = panel.options ?? {};
  const values = getFieldDisplayValues({
    data: frames,
    reduceOptions: o.reduceOptions ?? { calcs: ['lastNotNull'], fields: '', values: false },
    fieldConfig: { defaults: {}, overrides: [] },
    replaceVariables: (s) => s,
    theme,
    timeZone,
    sparkline: (o.graphMode ?? 'area') !== 'none',
  });
  if (values.length === 0) {
    return <NoData width={width} height={height} />;
  }
  // One value per stat panel here (every query aggregates): the stat
  // panel's VizRepeater with a single value is that value at full size.
  const v = values[0];
  return (
    <BigValue
      theme={theme}
      width={width}
      height={height}
      value={v.display}
      sparkline={v.sparkline}
      colorMode={o.colorMode ?? BigValueColorMode.Value}
      graphMode={o.graphMode ?? BigValueGraphMode.Area}
      justifyMode={o.justifyMode ?? BigValueJustifyMode.Auto}
      textMode={o.textMode ?? BigValueTextMode.Auto}
      text={o.text}
    />
  );
}

// Stand-in for the state-timeline panel: one row per series, each run of
// equal values (mergeValues) a band in its value mapping's colour at
// fillOpacity, rowHeight of the row's height; nulls left empty.
function StateTimelineStandIn({ panel, frames, width, height }) {
  if (frames.length === 0) {
    return <NoData width={width} height={height} />;
  }
  const mappings = panel.fieldConfig?.defaults?.mappings ?? [];
  const custom = panel.fieldConfig?.defaults?.custom ?? {};
  const alpha = (custom.fillOpacity ?? 70) / 100;
  const rowHeight = panel.options?.rowHeight ?? 0.9;
  const mapValue = (v) => {
    for (const m of mappings) {
      if (m.type === 'value' && m.options[String(v)]) {
        return m.options[String(v)];
      }
    }
    return { text: String(v), color: 'text' };
  };
  const rows = frames.map((f) => {
    const t = f.fields[0].values;
    const field = f.fields[1];
    return { name: field.state?.displayName ?? f.name, t, v: field.values };
  });
  rows.sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }));
  const font = theme.typography.fontSize;
  const labelW = Math.min(
    width / 3,
    8 + Math.max(...rows.map((r) => r.name.length)) * font * 0.6
  );
  const axisH = 22;
  const plotW = width - labelW;
  const rowH = (height - axisH) / rows.length;
  const x = (ms) => labelW + ((ms - FROM) / (TO - FROM)) * plotW;
  const ticks = [];
  const tickStep = [60e3, 120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3].find((s) => (TO - FROM) / s <= plotW / 90) ?? 3600e3;
  for (let ms = Math.ceil(FROM / tickStep) * tickStep; ms <= TO; ms += tickStep) {
    ticks.push(ms);
  }
  const bands = [];
  rows.forEach((r, i) => {
    let j = 0;
    while (j < r.t.length) {
      if (r.v[j] == null) {
        j++;
        continue;
      }
      let k = j;
      while (k + 1 < r.t.length && r.v[k + 1] === r.v[j]) {
        k++;
      }
      const end = k + 1 < r.t.length ? r.t[k + 1] : TO;
      const m = mapValue(r.v[j]);
      const y = i * rowH + (rowH * (1 - rowHeight)) / 2;
      bands.push(
        <rect
          key={`${i}-${j}`}
          x={x(Math.max(r.t[j], FROM))}
          y={y}
          width={Math.max(1, x(Math.min(end, TO)) - x(Math.max(r.t[j], FROM)))}
          height={rowH * rowHeight}
          fill={theme.visualization.getColorByName(m.color)}
          fillOpacity={alpha}
          stroke={theme.visualization.getColorByName(m.color)}
          strokeWidth={custom.lineWidth ?? 0}
        />
      );
      j = k + 1;
    }
  });
  const fmt = (ms) => dateTime(ms).utc().format('HH:mm');
  return (
    <svg width={width} height={height} style={{ fontFamily: theme.typography.fontFamily, fontSize: font }}>
      {rows.map((r, i) => (
        <text key={r.name} x={labelW - 8} y={i * rowH + rowH / 2} dy="0.35em" textAnchor="end" fill={theme.colors.text.primary}>
          {r.name}
        </text>
      ))}
      {bands}
      {ticks.map((ms) => (
        <text key={ms} x={x(ms)} y={height - 6} textAnchor="middle" fill={theme.colors.text.secondary}>
          {fmt(ms)}
        </text>
      ))}
    </svg>
  );
}

function Panel({ panel, result, width, height }) {
  return (
    <PanelChrome
      title={panel.title}
      description={panel.description}
      width={width}
      height={height}
      statusMessage={result.error}
    >
      {(w, h) => {
        if (result.error) {
          return <NoData width={w} height={h} />;
        }
        if (panel.type === 'stat') {
          return <StatViz panel={panel} frames={result.frames} width={w} height={h} />;
        }
        if (panel.type === 'state-timeline') {
          return <StateTimelineStandIn panel={panel} frames={result.frames} width={w} height={h} />;
        }
        return <TimeseriesViz panel={panel} frames={result.frames} width={w} height={h} />;
      }}
    </PanelChrome>
  );
}

function RowHeader({ panel, box }) {
  return (
    <div
      style={{
        position: 'absolute',
        ...box,
        display: 'flex',
        alignItems: 'center',
        fontSize: theme.typography.h5.fontSize,
        fontWeight: theme.typography.fontWeightMedium,
        color: theme.colors.text.primary,
      }}
    >
      <span style={{ marginRight: 8, color: theme.colors.text.secondary }}>⌄</span>
      {panel.title}
    </div>
  );
}

function Header({ dash, shown }) {
  const chip = {
    border: `1px solid ${theme.colors.border.medium}`,
    borderRadius: theme.shape.radius.default,
    padding: '4px 8px',
    marginRight: 8,
    color: theme.colors.text.primary,
    background: theme.colors.background.canvas,
  };
  const fmt = (ms) => dateTime(ms).utc().format('YYYY-MM-DD HH:mm:ss');
  return (
    <div style={{ marginBottom: 12 }}>
      <div style={{ fontSize: theme.typography.h3.fontSize, color: theme.colors.text.primary, marginBottom: 8 }}>{dash.title}</div>
      <div style={{ display: 'flex', alignItems: 'center', fontSize: theme.typography.bodySmall.fontSize }}>
        {shown.map(([k, v]) => (
          <span key={k} style={chip}>
            <span style={{ color: theme.colors.text.secondary }}>{k}</span> {v}
          </span>
        ))}
        <span style={{ flex: 1 }} />
        <span style={chip}>
          {fmt(FROM)} to {fmt(TO)} UTC
        </span>
      </div>
    </div>
  );
}

function Dashboard({ dash, shown, results }) {
  const panels = dash.panels;
  const bottom = Math.max(...panels.map((p) => place(p.gridPos).top + place(p.gridPos).height));
  return (
    <div style={{ padding: 16, width: WIDTH, boxSizing: 'content-box', background: theme.colors.background.canvas }}>
      <Header dash={dash} shown={shown} />
      <div style={{ position: 'relative', width: WIDTH, height: bottom }}>
        {panels.map((p, i) => {
          const box = place(p.gridPos);
          if (p.type === 'row') {
            return <RowHeader key={i} panel={p} box={box} />;
          }
          return (
            <div key={i} style={{ position: 'absolute', ...box }}>
              <Panel panel={p} result={results[i]} width={box.width} height={box.height} />
            </div>
          );
        })}
      </div>
    </div>
  );
}

async function main() {
  const dash = await (await fetch('superpeer.json')).json();
  const { vars, shown } = await resolveVariables(dash);
  const results = [];
  const report = [];
  for (const p of dash.panels) {
    if (p.type === 'row') {
      results.push(null);
      continue;
    }
    if (!['stat', 'timeseries', 'state-timeline'].includes(p.type)) {
      throw new Error(`panel ${p.title}: type ${p.type} not rendered`);
    }
    try {
      const frames = await queryPanel(p, vars, place(p.gridPos).width);
      const custom = p.type === 'timeseries' ? TIMESERIES_CUSTOM : null;
      const out = processed(p, frames, custom);
      results.push({ frames: out });
      const points = frames.reduce((n, f) => n + f.fields[1].values.filter((v) => v != null).length, 0);
      report.push({ title: p.title, type: p.type, series: frames.length, points });
    } catch (e) {
      results.push({ frames: [], error: String(e) });
      report.push({ title: p.title, type: p.type, error: String(e) });
    }
  }
  window.renderReport = report;
  createRoot(document.getElementById('root')).render(
    <ThemeContext.Provider value={theme}>
      <GlobalStyles />
      <Dashboard dash={dash} shown={shown} results={results} />
    </ThemeContext.Provider>
  );
  // uPlot draws on the frame after mount.
  await new Promise((r) => setTimeout(r, 500));
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  window.rendered = true;
}

main().catch((e) => {
  window.renderError = String(e && e.stack ? e.stack : e);
  window.rendered = true;
});
