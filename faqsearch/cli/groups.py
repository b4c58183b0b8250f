"""Command groups that still take the flag forms they replaced (`tune --fusion ...` is now `tune
fusion ...`, `train --encoder ...` is `train encoder ...`), so existing scripts keep working."""
from __future__ import annotations

import click


class FormerFlags(click.Group):
    """A command group that still takes the flag form it replaced (`tune --fusion ...` is now
    `tune fusion ...`): ``former(args)`` gives the sub-command's arguments for an old form (one that
    names a flag of ``flags``, or no sub-command), which then runs with a one-line deprecation note on
    stderr. Options the old command took but ignored, and the sub-command does not take, are dropped
    with a note, as the old command dropped them; options before a sub-command's name are an error."""

    def __init__(self, *args, former, flags, **kwargs):
        super().__init__(*args, **kwargs)
        self.former, self.flags = former, tuple(flags)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            named = next((a for a in args if a in self.commands), None)
            if named is not None and not any(a.split("=", 1)[0] in self.flags for a in args):
                raise click.UsageError(f"put the options after the sub-command: {ctx.command_path} {named} "
                                       "[OPTIONS] ...", ctx)
            new, dropped = self._known(self.former(list(args)))
            click.echo(f"Note: this form of `{ctx.command_path}` is deprecated; it runs as `{ctx.command_path} "
                       f"{new[0]}` (see `{ctx.command_path} {new[0]} --help`).", err=True)
            if dropped:
                click.echo(f"Note: ignored {', '.join(dropped)}: `{ctx.command_path} {new[0]}` does not take "
                           f"{'it' if len(dropped) == 1 else 'them'}.", err=True)
            args = new
        return super().parse_args(ctx, args)

    def _known(self, args: list[str]) -> tuple[list[str], list[str]]:
        """``args`` (a sub-command's name first) without the options that sub-command does not take;
        an option any sibling gives a value drops its value too."""
        sub = self.commands[args[0]]
        known = {o for p in sub.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        takes, any_takes = (_valued([sub]), _valued(self.commands.values()))
        out, dropped, i = [args[0]], [], 1
        while i < len(args):
            arg, name = args[i], args[i].split("=", 1)[0]
            if arg == "--":
                out += args[i:]
                break
            width = 2 if name.startswith("-") and "=" not in arg and name in (takes if name in known else any_takes) else 1
            if name.startswith("-") and len(name) > 1 and name not in known:
                dropped.append(name)
            else:
                out += args[i:i + width]
            i += width
        return out, dropped


def _valued(commands) -> set[str]:
    """The options of ``commands`` that take a value."""
    return {o for c in commands for p in c.params if isinstance(p, click.Option) and not p.is_flag and not p.count
            for o in p.opts}
