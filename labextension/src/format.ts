/**
 * Numbers and labels for the panel. Pure.
 */
import type { IBudget, ISlotInfo, IWorkflow } from './protocol';

/** 999 → "999", 1234 → "1.2k", 12345 → "12k", 1234567 → "1.2M". */
export function formatCount(n: number): string {
  if (!Number.isFinite(n) || n < 0) {
    return '0';
  }
  const scaled = (value: number, unit: string): string =>
    (value < 10 ? (Math.floor(value * 10) / 10).toString() : Math.floor(value).toString()) + unit;
  if (n < 1000) {
    return Math.round(n).toString();
  }
  if (n < 1_000_000) {
    return scaled(n / 1000, 'k');
  }
  return scaled(n / 1_000_000, 'M');
}

/** 1 → "1 message", 2 → "2 messages". */
export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** 1234567 → "1,234,567" (the same in every locale, so tests and screenshots agree). */
export function groupDigits(n: number): string {
  return Math.round(n)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

export interface ICountOptions {
  showMessages: boolean;
  showTokens: boolean;
}

/** The short counts on a row: "4 msg · 1.2k tok". */
export function countsLabel(slot: ISlotInfo, options: ICountOptions): string {
  const parts: string[] = [];
  if (options.showMessages) {
    parts.push(`${formatCount(slot.messages)} msg`);
  }
  if (options.showTokens) {
    parts.push(`${formatCount(slot.tokens)} tok`);
  }
  return parts.join(' · ');
}

/** A row's tooltip: everything about the slot, in words. */
export function slotTooltip(slot: ISlotInfo): string {
  const origin =
    slot.source === 'derived' && slot.parent
      ? `derived from ${slot.parent}`
      : slot.source === 'static'
        ? 'static (preset messages)'
        : 'new';
  const lines = [
    `${slot.id}${slot.current ? ' (current)' : ''}`,
    `mode ${slot.mode}, ${origin}`,
    `${plural(slot.messages, 'message')}, ${groupDigits(slot.tokens)} tokens, ${plural(slot.turns, 'turn')}`
  ];
  if (slot.last_user) {
    lines.push(`last asked: ${slot.last_user}`);
  }
  return lines.join('\n');
}

export interface IBudgetView {
  /** "3.2k of 128k tokens (2%)" */
  label: string;
  /** 0..1 for the bar, null when there is no total. */
  fraction: number | null;
  /** A part past its share says so: `over` is the short label, `note` what it means. */
  parts: { name: string; label: string; fraction: number; over: string | null; note: string | null }[];
}

/** A part past its share, in a few words (`overNote` says it whole). */
export function overLabel(name: string): string {
  if (name === 'system' || name === 'tools') {
    return 'over its share: it leaves history less room, so compaction starts sooner';
  }
  if (name === 'history' || name === 'tool_results') {
    return 'over its share: compacted once history and tool results pass their threshold';
  }
  return 'over its share';
}

/** What a part past its share means, in words (the kernel's budget: core/budget.py). */
export function overNote(name: string, used: number, limit: number, threshold: number | null): string {
  const head = `${name.replace(/_/g, ' ')} uses ${groupDigits(used)} tokens, more than its share of ${groupDigits(limit)}`;
  const at = threshold !== null ? ` (${groupDigits(threshold)} tokens now)` : '';
  if (name === 'system' || name === 'tools') {
    return (
      `${head}. The system side (system prompt and tools) is taken from the room for history ` +
      `and tool results, so compaction starts sooner${at}.`
    );
  }
  if (name === 'history' || name === 'tool_results') {
    return (
      `${head}. History and tool results share one threshold${at}: past it, older messages ` +
      'are compacted before the next turn.'
    );
  }
  return `${head}.`;
}

function ratio(used: number, limit: number): number {
  return limit > 0 ? Math.min(1, Math.max(0, used / limit)) : 0;
}

/** What the budget block shows, or null when there is nothing to show. */
export function budgetView(budget: IBudget | null): IBudgetView | null {
  if (budget === null) {
    return null;
  }
  // Against the slot's own budget when it has one, as the budget widget and the preview say.
  const total =
    budget.total ??
    budget.window ??
    (budget.parts.length ? budget.parts.reduce((sum, p) => sum + p.part.limit, 0) : null);
  const used = budget.used ?? budget.parts.reduce((sum, p) => sum + p.part.used, 0);
  const label =
    total !== null && total > 0
      ? `${formatCount(used)} of ${formatCount(total)} tokens (${Math.round(ratio(used, total) * 100)}%)`
      : `${formatCount(used)} tokens`;
  return {
    label,
    fraction: total !== null && total > 0 ? ratio(used, total) : null,
    parts: budget.parts.map(({ name, part }) => {
      const over = part.used > part.limit;
      return {
        name: name.replace(/_/g, ' '),
        label: `${formatCount(part.used)} / ${formatCount(part.limit)}`,
        fraction: ratio(part.used, part.limit),
        over: over ? overLabel(name) : null,
        note: over ? overNote(name, part.used, part.limit, budget.threshold ?? null) : null
      };
    })
  };
}

/** "draft (2 of 5 done) · next: review, send", or null. */
export function workflowLabel(workflow: IWorkflow | null): string | null {
  if (workflow === null) {
    return null;
  }
  const parts: string[] = [];
  const step = workflow.current ?? (workflow.total !== null && workflow.completed === workflow.total ? 'done' : null);
  let head = step ?? 'no current step';
  if (workflow.total !== null) {
    head += ` (${workflow.completed ?? 0} of ${workflow.total} done)`;
  }
  parts.push(workflow.name ? `${workflow.name}: ${head}` : head);
  if (workflow.next.length) {
    parts.push(`next: ${workflow.next.join(', ')}`);
  }
  return parts.join(' · ');
}
