/*
 * Shine's Dolphin probe: a freestanding GameCube program that proves, against the
 * real emulator, the three things the Dolphin backend relies on:
 *   1. the program runs (a magic word and a loop counter in RAM),
 *   2. frames tick (a counter bumped each video field, written at Melee's own
 *      global frame-counter address 0x80479D60 so the backend's frame tick works
 *      unchanged against it),
 *   3. controller port 2 reaches the guest (the Serial Interface input buffers of
 *      channel 1, mirrored raw into RAM every loop).
 *
 * Built by bridge/tests/real_dolphin.rs (and `shine-worker doctor`) with
 *   powerpc-linux-gnu-gcc -mcpu=750 -O2 -ffreestanding -nostdlib -fno-pic -mno-sdata
 * linked at 0x80003100 and packed as a DOL by shine_bridge::dolphin::dol.
 * Register sequence: shared/reference/melee-and-dolphin.md, section 5.
 * The mailbox layout is mirrored in shine_bridge::dolphin::probe; keep them in step.
 */

typedef unsigned int u32;
typedef unsigned short u16;

#define REG32(a) (*(volatile u32 *)(a))
#define REG16(a) (*(volatile u16 *)(a))

/* Serial Interface, channel 1 (= controller port 2); channels are 12 bytes apart. */
#define SI_C1OUTBUF 0xCC00640Cu
#define SI_C1INBUFH 0xCC006410u
#define SI_C1INBUFL 0xCC006414u
#define SI_POLL 0xCC006430u
#define SI_SR 0xCC006438u
/* Video Interface: current vertical beam position (half-lines); it wraps once a field. */
#define VI_VPOS 0xCC00202Cu

#define MELEE_FRAME_COUNTER 0x80479D60u
#define MAILBOX 0x80400000u
#define MB_MAGIC 0x00   /* 'SHNP' once the probe runs */
#define MB_FRAMES 0x04  /* video fields seen */
#define MB_LOOPS 0x08   /* main-loop iterations (proves life even if VI never ticks) */
#define MB_INBUFH 0x0C  /* raw SIC1INBUFH: buttons, main stick x, y */
#define MB_INBUFL 0x10  /* raw SIC1INBUFL: C stick x, y, L, R analog */
#define MB_VPOS 0x14    /* last beam position read (diagnostics) */

/* The DOL entry point: give C a stack (top of MEM1 minus a little) and enter main.
 * Nothing else is set up, and nothing else is needed: no interrupts, no heap. */
__asm__(".section .text.entry,\"ax\"\n"
        ".globl _start\n"
        "_start:\n"
        "  lis 1, 0x8170\n"
        "  addi 1, 1, -64\n"
        "  b probe_main\n"
        ".previous\n");

void probe_main(void) __attribute__((noreturn));
void probe_main(void)
{
    u32 frames = 0, loops = 0;
    u16 last = REG16(VI_VPOS);

    REG32(MAILBOX + MB_FRAMES) = 0;
    REG32(MAILBOX + MB_LOOPS) = 0;
    REG32(MELEE_FRAME_COUNTER) = 0;
    /* Poll command 0x40, analog mode 3, no rumble; poll channel 1 (EN1 = bit 6)
     * twice per field, then send the output buffers (SISR.WR). */
    REG32(SI_C1OUTBUF) = 0x00400300u;
    REG32(SI_POLL) = (0xF6u << 16) | (2u << 8) | 0x40u;
    REG32(SI_SR) = 0x80000000u;
    REG32(MAILBOX + MB_MAGIC) = 0x53484E50u; /* 'SHNP' */

    for (;;) {
        u16 v = REG16(VI_VPOS);
        REG32(MAILBOX + MB_INBUFH) = REG32(SI_C1INBUFH);
        REG32(MAILBOX + MB_INBUFL) = REG32(SI_C1INBUFL);
        REG32(MAILBOX + MB_VPOS) = v;
        /* The pad words above are stored before the counter moves, so a reader that
         * waits for the counter sees this field's input. */
        if (v < last) {
            frames++;
            REG32(MAILBOX + MB_FRAMES) = frames;
            REG32(MELEE_FRAME_COUNTER) = frames;
        }
        last = v;
        REG32(MAILBOX + MB_LOOPS) = ++loops;
    }
}
